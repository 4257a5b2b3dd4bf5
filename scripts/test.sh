#!/usr/bin/env bash
# Install everything the tests need (Debian packages, Python packages at the locked
# versions, the vSphere simulator, the Triton server) and run lint + the whole test suite.
#   --latest   the same against the newest versions pyproject.toml's ranges allow, in
#              .venv-latest / .venv-triton-latest (the locks are left as they are)
# Other arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv
setup=(--test)
if [[ "${1:-}" == "--latest" ]]; then
    shift
    venv=.venv-latest
    setup+=(--latest)
    export VGPU_TRITON_VENV=$PWD/.venv-triton-latest
fi
bash scripts/setup.sh "${setup[@]}"
# Everything the tests need was just installed: a lab that still skips is a failure.
export VGPU_REQUIRE_LABS=${VGPU_REQUIRE_LABS:-1}
"$venv/bin/ruff" check .
set +e
"$venv/bin/python" -m pytest "$@"
rc=$?
set -e
if [[ $rc -eq 5 ]]; then
    echo "pytest collected no tests: that is a failure here" >&2
    exit 1
fi
exit $rc

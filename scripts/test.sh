#!/usr/bin/env bash
# Install everything the tests need (Debian packages, Python packages, the vSphere
# simulator, the Triton server) and run lint + the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
# Everything the tests need was just installed: a lab that still skips is a failure.
export VGPU_REQUIRE_LABS=${VGPU_REQUIRE_LABS:-1}
.venv/bin/ruff check .
set +e
.venv/bin/python -m pytest "$@"
rc=$?
set -e
if [[ $rc -eq 5 ]]; then
    echo "pytest collected no tests: that is a failure here" >&2
    exit 1
fi
exit $rc

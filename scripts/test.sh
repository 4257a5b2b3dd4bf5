#!/usr/bin/env bash
# Install everything the tests need (Debian packages, Python packages at the locked
# versions, the vSphere simulator, the Triton server) and run lint + the whole test suite.
#   --latest   the same against the newest versions pyproject.toml's ranges allow, in
#              .venv-latest / .venv-triton-latest (the locks are left as they are)
#   --quick    the everyday loop: lint + the pure and unit tests, in the .venv that
#              scripts/setup.sh --test made once; nothing is installed, no lab is started
#              (no vSphere simulator, sshd, Docker, Triton, PostgreSQL, browser) and no
#              slow or torch run is made
# Other arguments go to pytest; scripts/run-pytest.sh says how each tier runs.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv
setup=(--test)
quick=0
case "${1:-}" in
    --latest)
        shift
        venv=.venv-latest
        setup+=(--latest)
        export VGPU_TRITON_VENV=$PWD/.venv-triton-latest
        ;;
    --quick)
        shift
        quick=1
        ;;
esac
if [[ $quick -eq 1 ]]; then
    if [[ ! -x $venv/bin/python ]]; then
        echo "no $venv: run scripts/setup.sh --test once, then scripts/test.sh --quick" >&2
        exit 2
    fi
    # The labs are left out on purpose here: a test that skips for one is not a failure.
    export VGPU_REQUIRE_LABS=${VGPU_REQUIRE_LABS:-0}
else
    bash scripts/setup.sh "${setup[@]}"
    # Everything the tests need was just installed: a lab that still skips is a failure.
    export VGPU_REQUIRE_LABS=${VGPU_REQUIRE_LABS:-1}
fi
"$venv/bin/ruff" check .
tier=--whole
if [[ $quick -eq 1 ]]; then
    tier=--quick
fi
exec bash scripts/run-pytest.sh "$venv" "$tier" "$@"

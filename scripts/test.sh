#!/usr/bin/env bash
# Install everything the tests need (Debian packages, Python packages at the locked
# versions, the vSphere simulator, the Triton server) and run lint + the whole test suite.
#   --latest   the same against the newest versions pyproject.toml's ranges allow, in
#              .venv-latest / .venv-triton-latest (the locks are left as they are)
#   --quick    the everyday loop: lint + the pure and unit tests, in the .venv that
#              scripts/setup.sh --test made once; nothing is installed, no lab is started
#              (no vSphere simulator, sshd, Docker, Triton, PostgreSQL, browser) and no
#              slow or torch run is made
# Other arguments go to pytest. The quick tier runs on $VGPU_TEST_WORKERS pytest-xdist
# workers (default 2; 0: one process). The whole suite runs in one process: its Docker labs
# each hold a lock on their cached data root for a whole session, so a second worker's lab
# would wait out the first's, and pytest-xdist 3.8's `--dist loadgroup` cannot keep them on
# one worker under pytest 9 (it renames `item._nodeid`, which pytest 9 no longer reads).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv
setup=(--test)
quick=0
# The tests that need a lab, torch runs or a GPU, and those marked slow (pyproject.toml).
QUICK_MARKERS="not (vcsim or sshd or triton or train or browser or postgres or docker or mpi or slow or gpu)"
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
workers=${VGPU_TEST_WORKERS:-2}
parallel=()
if [[ $quick -eq 1 && $workers != 0 ]]; then
    if "$venv/bin/python" -c 'import xdist' 2>/dev/null; then
        parallel=(-n "$workers")
    else
        echo "pytest-xdist is not in $venv (run scripts/setup.sh --test): one process" >&2
    fi
fi
set +e
if [[ $quick -eq 1 ]]; then
    "$venv/bin/python" -m pytest "${parallel[@]}" -m "$QUICK_MARKERS" "$@"
else
    "$venv/bin/python" -m pytest "$@"
fi
rc=$?
set -e
if [[ $rc -eq 5 ]]; then
    echo "pytest collected no tests: that is a failure here" >&2
    exit 1
fi
exit $rc

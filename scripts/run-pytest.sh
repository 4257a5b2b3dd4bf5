#!/usr/bin/env bash
# Runs a test tier in the venv given: scripts/run-pytest.sh VENV --quick|--whole [pytest args]
#   --quick  the pure and unit tests (no lab, no torch, nothing slow) on $VGPU_TEST_WORKERS
#            pytest-xdist workers (default 2; 0: one process)
#   --whole  every test; given no pytest arguments, as two pytest processes side by side:
#            the private Docker daemon lab's tests (markers docker, triton) with the torch,
#            MPI, PostgreSQL and browser ones in one, the rest in the other
#            (VGPU_TEST_WORKERS=0: one process). Not pytest-xdist: the Docker lab holds a
#            lock on its cached data root for a whole session, so its tests must share one
#            process, and pytest-xdist 3.8's `--dist loadgroup` cannot keep them on one
#            worker under pytest 9 (it renames `item._nodeid`, which pytest 9 no longer
#            reads). The Docker lab's tests alone took 6 min of the rest's 24: the others
#            join them, and a few long ones marked `side`, to even the two out.
# pytest's "collected no tests" (exit 5) is a failure here: a tier that runs nothing proves
# nothing. The exit code is the first failing process's.
set -uo pipefail
cd "$(dirname "$0")/.."
venv=$1
tier=$2
shift 2
python=$venv/bin/python
workers=${VGPU_TEST_WORKERS:-2}
# The tests that need a lab, torch runs or a GPU, and those marked slow (pyproject.toml).
QUICK_MARKERS="not (vcsim or sshd or triton or train or browser or postgres or docker or mpi or slow or side or gpu)"
SIDE_MARKERS="docker or triton or train or mpi or postgres or browser or side"

checked() {  # checked EXIT_CODE [WHAT]: 5 (no tests) becomes 1
    if [[ $1 -eq 5 ]]; then
        echo "pytest collected no tests${2:+ ($2)}: that is a failure here" >&2
        return 1
    fi
    return "$1"
}

if [[ $tier == --quick ]]; then
    parallel=()
    if [[ $workers != 0 ]]; then
        if "$python" -c 'import xdist' 2>/dev/null; then
            parallel=(-n "$workers")
        else
            echo "pytest-xdist is not in $venv (run scripts/setup.sh --test): one process" >&2
        fi
    fi
    "$python" -m pytest "${parallel[@]}" -m "$QUICK_MARKERS" "$@"
    checked $?
    exit $?
fi
if [[ $# -gt 0 || $workers == 0 ]]; then
    "$python" -m pytest "$@"
    checked $?
    exit $?
fi
side_log=$(mktemp "${TMPDIR:-/tmp}/vgpu-side-tests.XXXXXX")
echo "the side tests ($SIDE_MARKERS) run beside the rest; their output: $side_log"
"$python" -m pytest -p no:cacheprovider -m "$SIDE_MARKERS" >"$side_log" 2>&1 &
side=$!
trap 'kill "$side" 2>/dev/null' EXIT
"$python" -m pytest -m "not ($SIDE_MARKERS)"
checked $? "not ($SIDE_MARKERS)"
rest=$?
wait "$side"
checked $? "$SIDE_MARKERS"
lab=$?
trap - EXIT
echo
echo "==== the side tests ($SIDE_MARKERS), run beside the rest ===="
cat "$side_log"
echo "the rest: exit $rest; the side tests: exit $lab"
if [[ $rest -ne 0 ]]; then
    exit "$rest"
fi
exit "$lab"

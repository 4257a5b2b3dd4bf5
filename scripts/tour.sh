#!/usr/bin/env bash
# README's tour on a whole lab on this machine: the vSphere simulator, a Docker daemon and
# one simulated guest (an sshd in its own network namespace) per VM. Run as root; without
# root `vgpu sim up` gives the vCenter part only and the tour stops after apply.
#   sudo bash scripts/tour.sh            # after `bash scripts/setup.sh --test` (or test.sh):
#                                        # the simulator, sshd, docker.io, debootstrap
# VGPU (default: this checkout's .venv/bin/vgpu), TOUR_DIR (default: a new temp folder,
# kept: results, logs, report), TOUR_BENCH (arguments for the bench and revalidate runs;
# default one workload, two repeats: the CPU functional check; empty for the scenarios'
# own) and TOUR_CAPTURE (how the baseline is captured; default three series 10 s apart)
# change it. Exit 0 when every step passed and `vgpu sim down` left nothing behind.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
read -r -a vgpu <<< "${VGPU:-$repo/.venv/bin/vgpu}"
tour_dir=${TOUR_DIR:-$(mktemp -d -t vgpu-tour-XXXXXX)}
read -r -a bench_args <<< "${TOUR_BENCH---workload resnet50-offline --runs 2}"
read -r -a capture_args <<< "${TOUR_CAPTURE---baseline-series 3 --baseline-pause 10}"
export VGPU_SIM_STATE_DIR=${VGPU_SIM_STATE_DIR:-$tour_dir/sim-state}
unset VGPU_INVENTORY
cd "$tour_dir"
started=$SECONDS

step() {
    printf '\n== [%3ds] vgpu %s\n' "$((SECONDS - started))" "$*"
    "${vgpu[@]}" "$@"
}
judged() {  # a step that ends in verdicts: exit 3 (FAIL) or 4 (INCONCLUSIVE) lets the tour go on
    printf '\n== [%3ds] vgpu %s\n' "$((SECONDS - started))" "$*"
    local code=0
    "${vgpu[@]}" "$@" || code=$?
    if [ "$code" = 3 ] || [ "$code" = 4 ]; then
        echo "(verdict $([ "$code" = 3 ] && echo FAIL || echo INCONCLUSIVE): on this lab every side runs on the same shared CPU, so a verdict checks the chain, not a GPU)"
    elif [ "$code" != 0 ]; then
        return "$code"
    fi
}
finish() {
    local code=$?
    "${vgpu[@]}" sim down >/dev/null 2>&1 || true
    printf '\n== tour %s in %d s (folder %s)\n' \
        "$([ "$code" = 0 ] && echo passed || echo "FAILED (exit $code)")" \
        "$((SECONDS - started))" "$tour_dir"
}
trap finish EXIT

step scenarios >/dev/null
step plan --scenario 8 >/dev/null
step sim up --port "${VGPU_SIM_PORT:-0}"
step preflight --scenario 8 >/dev/null
step apply "$repo/scenarios/mig_7x1g.yaml" --yes
step sim status
step bench --scenario bm8 "${bench_args[@]}"   # bare metal: on this machine, the reference
judged bench --scenario 8 "${bench_args[@]}"   # in containers on the seven guests: a verdict
step destroy --scenario 8 --yes       # the pool's first addresses are scenario 6's next
step bench --scenario bm6 "${bench_args[@]}"
# After an upgrade: one host, its own baseline, the upgrade window around it
judged revalidate --host DC0_C0_H0 --scenario 6 --capture-baseline "${capture_args[@]}" --yes "${bench_args[@]}"
step drain --host DC0_C0_H0             # vgpu's VMs shut down, facts saved, maintenance mode
step sim upgrade --host DC0_C0_H0       # a new ESXi build and host driver VIB, rebooted
step undrain --host DC0_C0_H0           # checks the upgrade took, out of maintenance
judged revalidate --host DC0_C0_H0 --scenario 6 --yes "${bench_args[@]}"
step destroy --scenario 6 --yes
step sim down
left=$(ip netns list 2>/dev/null | grep -c '^vgpusim-' || true)
daemons=$(pgrep -f -c -- '--data-root=.*/sim-docker/data' || true)
if [ "$left" != 0 ] || [ "$daemons" != 0 ] || ip link show vgpusim0 >/dev/null 2>&1 || id vgpu-sim >/dev/null 2>&1; then
    echo "left behind after vgpu sim down: namespaces $left, dockerd $daemons, bridge or user" >&2
    exit 1
fi

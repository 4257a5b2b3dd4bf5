#!/usr/bin/env bash
# Installs what vgpu needs into ./.venv, at the versions locked in scripts/locks/ (each
# package pinned with its hashes; scripts/lock.sh refreshes them). With --test, also what
# the test suite needs: Debian packages (Go + govmomi for the vSphere simulator, OpenSSH
# server, Chromium, PostgreSQL for the shared results store's tests), the Triton server in
# its own environment, and the simulator binary.
# With --latest (after --test), the newest versions pyproject.toml's ranges allow instead
# of the locks, into .venv-latest and .venv-triton-latest: an upstream change found on
# purpose (scripts/test.sh --latest).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PYTHON:-python3}
WITH_TEST=0
LATEST=0
# torch is not in the locks: this version resolves to the CPU build the machine keeps on
# disk; an open range would pull the newest CUDA build (several GB) from the index.
TORCH_VERSION=${VGPU_TORCH_VERSION:-2.13.0}
for arg in "$@"; do
    case $arg in
        --test) WITH_TEST=1 ;;
        --latest) LATEST=1 ;;
        *) echo "usage: scripts/setup.sh [--test] [--latest]" >&2; exit 2 ;;
    esac
done
VENV=.venv
TRITON_VENV=.venv-triton
if [[ $LATEST -eq 1 ]]; then
    VENV=.venv-latest
    TRITON_VENV=.venv-triton-latest
fi

log() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }
# Runs a pip command quietly; on failure shows its output and fails the script.
pip_quiet() {
    local out
    out=$(mktemp)
    if ! "$@" >"$out" 2>&1; then
        grep -v '^WARNING: Location' "$out" >&2
        rm -f "$out"
        return 1
    fi
    rm -f "$out"
}
as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

install_apt() {
    local missing=()
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
            || missing+=("$pkg")
    done
    [[ ${#missing[@]} -eq 0 ]] && return 0
    log "apt-get install ${missing[*]}"
    as_root apt-get update -q >/dev/null
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        "${missing[@]}" >/dev/null
}

setup_venv() {
    local lock=$1 extras=$2
    if [[ ! -x $VENV/bin/python ]]; then
        log "creating $VENV"
        "$PY" -m venv "$VENV"
    fi
    if [[ $LATEST -eq 1 ]]; then
        log "pip install --upgrade -e .[$extras] (the newest versions the ranges allow)"
        pip_quiet "$VENV/bin/pip" install -q --upgrade --upgrade-strategy eager pip
        pip_quiet "$VENV/bin/pip" install -q --upgrade --upgrade-strategy eager \
            "torch==$TORCH_VERSION" -e ".[$extras]"
        "$VENV/bin/pip" freeze --exclude-editable > "$VENV/versions.txt"
        log "versions installed: $VENV/versions.txt (compare with scripts/locks/$lock)"
    else
        log "pip install -r scripts/locks/$lock (hashes required)"
        pip_quiet "$VENV/bin/pip" install -q --require-hashes -r "scripts/locks/$lock"
        if [[ $lock == test.txt ]]; then
            # torch's own requirements are in the lock; the build itself is pinned here
            pip_quiet "$VENV/bin/pip" install -q --no-deps "torch==$TORCH_VERSION"
        fi
        log "pip install -e . (no dependencies: the lock has them)"
        pip_quiet "$VENV/bin/pip" install -q --no-deps --no-build-isolation -e .
    fi
    "$VENV/bin/python" -c "import vgpu, loadgen" >/dev/null
}

# ---- Triton server (nvidia-pytriton wheel pins numpy<2, so it lives in .venv-triton)
setup_triton() {
    if [[ ! -x $TRITON_VENV/bin/python ]]; then
        log "creating $TRITON_VENV"
        "$PY" -m venv "$TRITON_VENV"
    fi
    if [[ $LATEST -eq 1 ]]; then
        log "pip install --upgrade nvidia-pytriton onnxruntime into $TRITON_VENV"
        pip_quiet "$TRITON_VENV/bin/pip" install -q --upgrade -r scripts/locks/triton.in
    else
        log "pip install -r scripts/locks/triton.txt into $TRITON_VENV"
        pip_quiet "$TRITON_VENV/bin/pip" install -q --require-hashes -r scripts/locks/triton.txt
    fi
}

# ---- vSphere simulator (govmomi's simulator shaped as a GPU lab: vgpu/sim/vcsim/main.go),
# built once per machine into ~/.cache/vgpu (or $VGPU_CACHE_DIR); a rebuild only follows
# edits to main.go or a new Go/govmomi
setup_vcsim() {
    if [[ -f vgpu/sim/vcsim/main.go ]]; then
        log "vSphere simulator: $("$VENV/bin/python" -m vgpu.sim.build)"
    fi
}

if [[ $WITH_TEST -eq 1 ]]; then
    install_apt golang-go golang-github-vmware-govmomi-dev openssh-server chromium sudo docker.io debootstrap \
        iproute2 postgresql e2fsprogs util-linux openmpi-bin libopenmpi-dev
    # The two environments are independent: the Triton one installs while .venv does.
    setup_triton &
    triton=$!
    setup_venv test.txt "dev,train,mpi"
    setup_vcsim
    wait "$triton"
else
    setup_venv vgpu.txt ""  # inference only: `vgpu bench` of the inference scenarios needs no torch
fi
log "ready: $ROOT/$VENV/bin/vgpu"

#!/usr/bin/env bash
# Installs what vgpu needs into ./.venv. With --test, also what the test suite needs:
# Debian packages (Go + govmomi for the vSphere simulator, OpenSSH server, Chromium,
# PostgreSQL for the shared results store's tests),
# the Triton server in its own environment, and the simulator binary.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PYTHON:-python3}
WITH_TEST=0
TORCH_VERSION=${VGPU_TORCH_VERSION:-2.13.0}
[[ "${1:-}" == "--test" ]] && WITH_TEST=1

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
    local extras=$1
    if [[ ! -x .venv/bin/python ]]; then
        log "creating .venv"
        "$PY" -m venv .venv
    fi
    if [[ ",$extras," == *",train,"* ]] && ! .venv/bin/python -c "import torch" 2>/dev/null; then
        # Pinned: an open range would pull the newest CUDA build (several GB) from the
        # index; this version resolves to the CPU build this machine kind keeps on disk.
        log "pip install torch==$TORCH_VERSION"
        pip_quiet .venv/bin/pip install -q "torch==$TORCH_VERSION"
    fi
    local target="."
    [[ -n "$extras" ]] && target=".[$extras]"
    log "pip install -e $target"
    pip_quiet .venv/bin/pip install -q -e "$target"
    .venv/bin/python -c "import vgpu, loadgen" >/dev/null
}

# ---- Triton server (nvidia-pytriton wheel pins numpy<2, so it lives in .venv-triton)
setup_triton() {
    if [[ ! -x .venv-triton/bin/python ]]; then
        log "creating .venv-triton"
        "$PY" -m venv .venv-triton
    fi
    if ! .venv-triton/bin/python -c "import pytriton, onnxruntime" >/dev/null 2>&1; then
        log "pip install nvidia-pytriton onnxruntime into .venv-triton"
        pip_quiet .venv-triton/bin/pip install -q "nvidia-pytriton==0.7.0" onnxruntime
    fi
}

# ---- vSphere simulator (govmomi's simulator shaped as a GPU lab: vgpu/sim/vcsim/main.go),
# built once per machine into ~/.cache/vgpu (or $VGPU_CACHE_DIR); a rebuild only follows
# edits to main.go or a new Go/govmomi
setup_vcsim() {
    if [[ -f vgpu/sim/vcsim/main.go ]]; then
        log "vSphere simulator: $(.venv/bin/python -m vgpu.sim.build)"
    fi
}

if [[ $WITH_TEST -eq 1 ]]; then
    install_apt golang-go golang-github-vmware-govmomi-dev openssh-server chromium sudo docker.io debootstrap \
        iproute2 postgresql
    # The two environments are independent: the Triton one installs while .venv does.
    setup_triton &
    triton=$!
    setup_venv "dev,train"
    setup_vcsim
    wait "$triton"
else
    setup_venv ""  # inference only: `vgpu bench` of the inference scenarios needs no torch
fi
log "ready: $ROOT/.venv/bin/vgpu"

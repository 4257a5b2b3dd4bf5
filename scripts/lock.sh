#!/usr/bin/env bash
# Refreshes the locks that scripts/setup.sh installs from (scripts/locks/*.txt and the
# harness image's vgpu/container/harness_image/harness-requirements.txt): the newest
# versions that pyproject.toml's ranges and the inputs in scripts/locks/*.in allow, each
# pinned with the hashes of all its files. Then run `bash scripts/test.sh` and commit the locks with it.
#
# uv resolves (universal: one lock for every Python >= 3.11 and platform; 3.10 for the
# harness image, whose NGC bases ship it); plain pip installs the result.
set -euo pipefail
cd "$(dirname "$0")/.."
UV_VERSION=0.13.8
TORCH_VERSION=${VGPU_TORCH_VERSION:-2.13.0}
tools=${VGPU_LOCK_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/vgpu/lock-tools}

log() { printf '\033[1m[lock]\033[0m %s\n' "$*" >&2; }

if ! "$tools/bin/uv" --version 2>/dev/null | grep -q " $UV_VERSION"; then
    log "installing uv $UV_VERSION into $tools"
    python3 -m venv "$tools"
    "$tools/bin/pip" install -q "uv==$UV_VERSION"
fi
uv=("$tools/bin/uv" pip compile --quiet --generate-hashes --no-header --annotation-style line)

# torch is installed on its own (its CPU build from the pinned version, see setup.sh):
# the lock holds what that build requires, read from the build's own metadata.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m pip download -q --no-deps -d "$work" "torch==$TORCH_VERSION"
python3 - "$work" > scripts/locks/torch-deps.in <<'PY'
import sys, zipfile, pathlib
wheel = next(pathlib.Path(sys.argv[1]).glob("torch-*.whl"))
with zipfile.ZipFile(wheel) as zf:
    meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
    lines = zf.read(meta).decode().splitlines()
print(f"# What {wheel.name} requires (written by scripts/lock.sh)")
for line in lines:
    if line.startswith("Requires-Dist:") and "extra ==" not in line:
        print(line.split(":", 1)[1].strip())
PY

log "scripts/locks/vgpu.txt: vgpu itself (scripts/bench.sh)"
"${uv[@]}" --universal --python-version 3.11 pyproject.toml scripts/locks/build.in \
    -o scripts/locks/vgpu.txt
log "scripts/locks/test.txt: vgpu with its dev and mpi extras and torch's requirements (scripts/test.sh)"
"${uv[@]}" --universal --python-version 3.11 pyproject.toml --extra dev --extra mpi \
    scripts/locks/build.in scripts/locks/torch-deps.in -o scripts/locks/test.txt
log "scripts/locks/triton.txt: the Triton server environment of the tests (.venv-triton)"
"${uv[@]}" --universal --python-version 3.11 scripts/locks/triton.in -o scripts/locks/triton.txt
log "vgpu/container/harness_image/harness-requirements.txt: the harness image (ONNX Runtime added by its build)"
"${uv[@]}" --universal --python-version 3.10 vgpu/container/harness_image/harness-requirements.in \
    --no-emit-package onnxruntime-gpu -o vgpu/container/harness_image/harness-requirements.txt
log "done: git diff scripts/locks vgpu/container/harness_image, then bash scripts/test.sh"

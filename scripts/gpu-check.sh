#!/usr/bin/env bash
# GPU acceptance run on a host with an NVIDIA GPU and no package index (docs/gpu-check.md):
#   1. a venv (.venv-gpu) on the host's Python with --system-site-packages, so the host's
#      PyTorch (CUDA), nvidia-ml-py, numpy, onnx, onnxruntime and pytest are used as they are;
#   2. the wheels from $1 (default ./.whl, made by scripts/gpu-wheels.sh), offline;
#   3. this project, editable, without dependencies;
#   4. pytest -m gpu tests/gpu with VGPU_REQUIRE_GPU=1: a GPU skip is a failure here.
# The figures (harness / raw ratios, samples/s, GPU, driver, CUDA, MIG mode) go to
# ${OUT:-.}/gpu-check.json; the exit status is pytest's. Read-only on the GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
wheels=${1:-./.whl}
venv=${VGPU_GPU_VENV:-.venv-gpu}
out=${OUT:-.}
python=${PYTHON:-python3}
if [[ ! -d "$wheels" ]]; then
    echo "error: no wheel folder $wheels (make it with scripts/gpu-wheels.sh)" >&2
    exit 2
fi
if ! "$python" -m venv --system-site-packages "$venv"; then
    # No ensurepip (Debian without python3-venv): the host's own pip serves the venv.
    echo "note: creating $venv without pip; the host's pip installs into it" >&2
    "$python" -m venv --system-site-packages --without-pip "$venv"
fi
"$venv/bin/python" -m pip install --quiet --no-index --find-links "$wheels" \
    -r scripts/gpu-requirements.txt
"$venv/bin/python" -m pip install --quiet --no-deps --no-build-isolation -e .
mkdir -p "$out"
figures=$(cd "$out" && pwd)/gpu-check.json
set +e
VGPU_REQUIRE_GPU=1 VGPU_GPU_FIGURES="$figures" \
    "$venv/bin/python" -m pytest -m gpu tests/gpu -rA -p no:cacheprovider
rc=$?
set -e
echo "figures: $figures (pytest exit $rc)"
exit $rc

#!/usr/bin/env bash
# GPU acceptance run on a host with an NVIDIA GPU and no package index (docs/gpu-check.md):
#   gpu-check.sh [--no-ort-gpu] [WHEEL_FOLDER]
#   1. a venv (.venv-gpu) on the host's Python that also sees every site-packages folder of
#      that Python through a .pth file, so the host's PyTorch (CUDA), nvidia-ml-py, numpy,
#      onnx, onnxruntime and pytest are used as they are, also when the host's python3 is
#      itself a venv (whose packages `venv --system-site-packages` would not see);
#   2. the wheels from WHEEL_FOLDER (default ./.whl, made by scripts/gpu-wheels.sh), offline;
#   3. this project, editable, without dependencies;
#   4. pytest -m gpu tests/gpu with VGPU_REQUIRE_GPU=1: a GPU skip is a failure here, and
#      so is onnxruntime without its CUDA provider unless --no-ort-gpu is given.
# The figures (harness / raw ratios, samples/s, GPU, driver, CUDA, MIG mode) go to
# ${OUT:-.}/gpu-check.json; the exit status is pytest's. Read-only on the GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
no_ort_gpu=0
if [[ "${1:-}" == "--no-ort-gpu" ]]; then
    no_ort_gpu=1
    shift
fi
wheels=${1:-./.whl}
venv=${VGPU_GPU_VENV:-.venv-gpu}
out=${OUT:-.}
python=${PYTHON:-python3}
if [[ ! -d "$wheels" ]]; then
    echo "error: no wheel folder $wheels (make it with scripts/gpu-wheels.sh)" >&2
    exit 2
fi
# Without pip (no ensurepip needed): the host's pip, reached through the .pth, installs.
"$python" -m venv --without-pip "$venv"
venv_site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$python" -c '
import site, sys
for folder in site.getsitepackages():
    print(f"import site; site.addsitedir({folder!r})")
' >"$venv_site/_host_site_packages.pth"
"$venv/bin/python" -m pip install --quiet --no-index --find-links "$wheels" \
    -r scripts/gpu-requirements.txt
# onnxruntime-gpu, where its wheel was brought (docs/gpu-check.md: too big for one call's
# carry, it comes in chunks): it shadows the host's CPU build inside the venv only.
for ort_gpu in "$wheels"/onnxruntime_gpu-*.whl; do
    if [[ -f "$ort_gpu" ]]; then
        "$venv/bin/python" -m pip install --quiet --no-index --no-deps "$ort_gpu"
    fi
done
"$venv/bin/python" -m pip install --quiet --no-deps --no-build-isolation -e .
mkdir -p "$out"
figures=$(cd "$out" && pwd)/gpu-check.json
set +e
VGPU_REQUIRE_GPU=${VGPU_REQUIRE_GPU:-1} VGPU_NO_ORT_GPU=$no_ort_gpu VGPU_GPU_FIGURES="$figures" \
    "$venv/bin/python" -m pytest -m gpu tests/gpu -rA -p no:cacheprovider
rc=$?
set -e
echo "figures: $figures (pytest exit $rc)"
exit $rc

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
#      so is onnxruntime without its CUDA provider unless --no-ort-gpu is given;
#   5. where pytest found a GPU: the harness overhead benchmark at the batch sizes the
#      suite's probe chose (VGPU_CHECK_OVERHEAD=0 skips it), and the main job in its GPU
#      form on the whole GPU, scenario 6's ResNet50 and BERT against their bare-metal twin
#      within a budget, ending in a verdict (VGPU_CHECK_MAIN_JOB=0 skips it).
# The figures (harness / raw ratios, samples/s, GPU busy, chosen batch sizes, GPU, driver,
# CUDA, MIG mode, the overhead benchmark, the main job's verdict and time) go to
# ${OUT:-.}/gpu-check.json. Exit status: pytest's if it failed, else 1 when the overhead
# goals were missed or the main job ended without a verdict, else 0. Read-only on the GPU.
# Sized to finish within 8 minutes on an H100/H200 (docs/gpu-check.md).
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
started=$SECONDS
set +e
VGPU_REQUIRE_GPU=${VGPU_REQUIRE_GPU:-1} VGPU_NO_ORT_GPU=$no_ort_gpu VGPU_GPU_FIGURES="$figures" \
    "$venv/bin/python" -m pytest -m gpu tests/gpu -rA -p no:cacheprovider
rc=$?
suite_s=$((SECONDS - started))
set -e
out_dir=$(dirname "$figures")
merge() {  # merge KEY JSON-FILE-OR-LITERAL into the figures
    "$venv/bin/python" scripts/gpu_figures.py "$figures" "$@"
}
merge suite_seconds "$suite_s"
if ! "$venv/bin/python" scripts/gpu_figures.py "$figures" --has-gpu; then
    echo "figures: $figures (pytest exit $rc; no GPU: overhead benchmark and main job skipped)"
    exit $rc
fi
final=$rc
if [[ "${VGPU_CHECK_OVERHEAD:-1}" != "0" ]]; then
    started=$SECONDS
    set +e
    "$venv/bin/python" benchmarks/gpu_harness_overhead.py --workload all --seconds 8 \
        --raw-seconds 6 --repeats 2 --batches-from "$figures" --json "$out_dir/overhead.json" \
        --out "$out_dir/overhead-runs"
    overhead_rc=$?
    set -e
    merge overhead "$out_dir/overhead.json" overhead_exit "$overhead_rc" \
        overhead_seconds "$((SECONDS - started))"
    if [[ $final == 0 && $overhead_rc != 0 ]]; then final=1; fi
fi
if [[ "${VGPU_CHECK_MAIN_JOB:-1}" != "0" ]]; then
    started=$SECONDS
    set +e
    # The main job's GPU form: this machine (no inventory), its whole GPU, scenario 6's two
    # Offline workloads interleaved with their bare-metal twin, repeated until decided
    # within the budget; its exit code is the verdict (vgpu/exitcodes.py).
    timeout -s INT -k 30 "${VGPU_CHECK_MAIN_JOB_LIMIT:-300}" "$venv/bin/python" -m vgpu bench -s 6 \
        -w resnet50-offline -w bert-offline --until-decided --max-repeats 4 \
        --budget "${VGPU_CHECK_MAIN_JOB_BUDGET:-200s}" --db "$out_dir/main-job.db" \
        --no-report >"$out_dir/main-job.log" 2>&1
    main_rc=$?
    set -e
    tail -40 "$out_dir/main-job.log"
    merge main_job_exit "$main_rc" main_job_seconds "$((SECONDS - started))"
    if [[ $final == 0 && $main_rc != 0 && $main_rc != 3 && $main_rc != 4 ]]; then final=1; fi
fi
echo "figures: $figures (pytest exit $rc, check exit $final)"
exit $final

#!/usr/bin/env bash
# Download the wheels the GPU acceptance host needs (scripts/gpu-requirements.txt and
# their dependencies) for Python 3.12 (VGPU_WHEELS_PYTHON to change) on manylinux x86_64
# into ./.whl (git-ignored), on a machine that reaches the package index. Carry the
# folder to the GPU host and run scripts/gpu-check.sh there. Fails if the wheels add up to more than 60 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-./.whl}
limit_mib=60
python=${PYTHON:-python3}
# The GPU host's Python (3.12); 3.11 for a replica built on this machine (gpu-replica.py).
target_python=${VGPU_WHEELS_PYTHON:-3.12}
[[ -x .venv/bin/python ]] && python=${PYTHON:-.venv/bin/python}
mkdir -p "$dest"
# manylinux_2_28 too: mlcommons-loadgen publishes no manylinux2014 wheel.
"$python" -m pip download --only-binary=:all: --python-version "$target_python" --implementation cp \
    --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
    -d "$dest" -r scripts/gpu-requirements.txt
total_kib=$(du -sk "$dest" | cut -f1)
echo "$(find "$dest" -type f -name '*.whl' | wc -l) wheels, $((total_kib / 1024)) MiB in $dest"
if (( total_kib > limit_mib * 1024 )); then
    echo "error: $dest holds more than $limit_mib MiB" >&2
    exit 1
fi

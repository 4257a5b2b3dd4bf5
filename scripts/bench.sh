#!/usr/bin/env bash
# Install vgpu and run the main job on this machine: `vgpu bench --scenario 6`.
# Extra arguments are passed to `vgpu bench`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/vgpu bench --scenario 6 "$@"

"""Defaults and environment variable names that the command line shows in its options'
help, declared where the modules that use them take them from. This module imports
nothing, so declaring the CLI's options loads none of those modules (`vgpu --help` and
shell completion stay light; tests/cli/test_light_imports.py)."""

from pathlib import Path

DEFAULT_DB = Path("vgpu-results.db")  # the results store, vgpu.results.store.result_store
DB_ENV = "VGPU_DB"
DEFAULT_BASE_IMAGE = "nvcr.io/nvidia/pytorch:24.10-py3"  # the harness image's base
DEFAULT_MAX_CLOCK_OFFSET_MS = 50.0  # refuse a synchronised start past this clock offset
DEFAULT_BASELINE = "pre-upgrade"  # the baseline set `vgpu revalidate` judges against
# --capture-baseline: series per scenario and the pause between them, vgpu.revalidate.capture
DEFAULT_CAPTURE_SERIES = 3
DEFAULT_CAPTURE_PAUSE_S = 60.0  # another minute: clocks, caches and other tenants move on
GPU_SIMULATOR_ENV = "VGPU_GPU_SIMULATOR"  # the simulated NVML backend, vgpu.nvml.select

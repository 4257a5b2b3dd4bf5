"""Which backend this machine gets: the real GPU whenever NVML initialises and sees one;
the simulator only when asked for explicitly (VGPU_GPU_SIMULATOR=A100-80GB or a flag),
and never in place of a real GPU."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vgpu.defaults import GPU_SIMULATOR_ENV as SIMULATOR_ENV
from vgpu.errors import InputError
from vgpu.nvml.backend import GpuBackend
from vgpu.nvml.errors import NvmlUnavailable
from vgpu.nvml.real import NvmlBackend, load_nvml
from vgpu.nvml.simulator import SimulatedGpuBackend, parse_simulator_spec

SIMULATOR_STATE_ENV = "VGPU_GPU_SIMULATOR_STATE"


def simulator_from_env(spec: str | None = None) -> SimulatedGpuBackend | None:
    flag = bool(spec)
    spec = spec or os.environ.get(SIMULATOR_ENV)
    if not spec:
        return None
    state = os.environ.get(SIMULATOR_STATE_ENV)
    try:
        models = parse_simulator_spec(spec)
    except ValueError as exc:
        where = "--simulator" if flag else SIMULATOR_ENV
        raise InputError.single("command line" if flag else "environment", where, str(exc),
                                fix="use one of the models listed") from None
    return SimulatedGpuBackend(models, state_file=Path(state) if state else None)


def backend_for_this_machine(simulator: str | None = None,
                             nvml_loader: Callable[[], Any] = load_nvml) -> GpuBackend:
    """NvmlBackend when NVML finds a GPU; else the simulator if ``simulator`` or
    $VGPU_GPU_SIMULATOR names a model; else NvmlUnavailable saying why."""
    try:
        backend = NvmlBackend(nvml_loader())
        if backend.gpus():
            return backend
        backend.close()
        reason = "NVML sees no GPU"
    except NvmlUnavailable as exc:
        reason = str(exc)
    sim = simulator_from_env(simulator)
    if sim is not None:
        return sim
    raise NvmlUnavailable(f"{reason}. On a machine without an NVIDIA GPU set "
                          f"{SIMULATOR_ENV}=A100-80GB to use a simulated GPU")

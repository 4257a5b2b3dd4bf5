"""Bare-metal MIG layouts through NVML: one GpuBackend interface, the real GPU (NvmlBackend)
or a simulated one (SimulatedGpuBackend), the layout operations on top, and a bare-metal
scenario applied on its hosts (``baremetal``, not re-exported: it plans through the site)."""

from vgpu.nvml.backend import GpuBackend
from vgpu.nvml.errors import LayoutError, MigError, NvmlUnavailable
from vgpu.nvml.layout import apply_layout, verify_layout
from vgpu.nvml.local_devices import MigDeviceInfo, mig_devices_for_bench
from vgpu.nvml.real import NvmlBackend
from vgpu.nvml.select import backend_for_this_machine
from vgpu.nvml.simulator import SimulatedGpuBackend
from vgpu.nvml.spec import LayoutSpec, SliceSpec
from vgpu.nvml.state import StateStore
from vgpu.nvml.teardown import destroy_layout

__all__ = [
    "GpuBackend",
    "LayoutError",
    "LayoutSpec",
    "MigDeviceInfo",
    "MigError",
    "NvmlBackend",
    "NvmlUnavailable",
    "SimulatedGpuBackend",
    "SliceSpec",
    "StateStore",
    "apply_layout",
    "backend_for_this_machine",
    "destroy_layout",
    "mig_devices_for_bench",
    "verify_layout",
]

"""Binds the run to a GPU or MIG slice through CUDA_VISIBLE_DEVICES, which must be set
before any CUDA context exists (so before onnxruntime creates a GPU session and before
torch initialises CUDA)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from loadgen.spec import DeviceSpec

CPU_NOTE = "CPU: no GPU/MIG slice used"


@dataclass(frozen=True)
class DeviceBinding:
    kind: str
    cuda_visible_devices: str | None
    onnxruntime_imported_before: bool
    torch_cuda_initialized_before: bool = False

    def as_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "cuda_visible_devices": self.cuda_visible_devices,
            "onnxruntime_imported_before_binding": self.onnxruntime_imported_before,
            "torch_cuda_initialized_before_binding": self.torch_cuda_initialized_before,
        }


def device_order_for(device: DeviceSpec) -> str | None:
    """CUDA numbers GPUs fastest first by default, NVML and nvidia-smi by PCI bus: an
    index from either only means the same GPU to CUDA with PCI_BUS_ID order. A UUID
    needs no order."""
    if device.kind == "gpu" and device.uuid is None and device.index is not None:
        return "PCI_BUS_ID"
    return None


def visible_devices_for(device: DeviceSpec) -> str | None:
    if device.kind == "mig":
        return device.uuid
    if device.kind == "gpu":
        if device.uuid is not None:
            return device.uuid
        if device.index is not None:
            return str(device.index)
    return None


def _torch_cuda_initialized() -> bool:
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_initialized())


def bind_device(device: DeviceSpec) -> DeviceBinding:
    imported = "onnxruntime" in sys.modules
    torch_cuda = _torch_cuda_initialized()
    value = visible_devices_for(device)
    if value is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = value
    order = device_order_for(device)
    if order is not None:
        os.environ["CUDA_DEVICE_ORDER"] = order
    return DeviceBinding(device.kind, os.environ.get("CUDA_VISIBLE_DEVICES"), imported,
                         torch_cuda)

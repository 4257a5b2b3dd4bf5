"""Binds the run to a GPU or MIG slice through CUDA_VISIBLE_DEVICES, which must be set
before any CUDA context exists (so before onnxruntime creates a GPU session)."""

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

    def as_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "cuda_visible_devices": self.cuda_visible_devices,
            "onnxruntime_imported_before_binding": self.onnxruntime_imported_before,
        }


def visible_devices_for(device: DeviceSpec) -> str | None:
    if device.kind == "mig":
        return device.uuid
    if device.kind == "gpu":
        if device.uuid is not None:
            return device.uuid
        if device.index is not None:
            return str(device.index)
    return None


def bind_device(device: DeviceSpec) -> DeviceBinding:
    imported = "onnxruntime" in sys.modules
    value = visible_devices_for(device)
    if value is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = value
    return DeviceBinding(device.kind, os.environ.get("CUDA_VISIBLE_DEVICES"), imported)

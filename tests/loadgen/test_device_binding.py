"""The harness binds its run to a GPU through CUDA_VISIBLE_DEVICES before CUDA starts: a
GPU or MIG UUID is passed through as it is (CUDA accepts both, and inside a container
given one GPU that GPU keeps its UUID while its index becomes 0); an index comes with
CUDA_DEVICE_ORDER=PCI_BUS_ID so it means the GPU nvidia-smi and NVML call by that index."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from loadgen.device import bind_device
from loadgen.errors import SpecError
from loadgen.spec import parse_spec

GPU_2 = "GPU-4c1b7f0e-0000-4000-8000-000000000002"
MIG_IN_VGPU = "MIG-8a1c0a52-8b7c-5d3f-a1e2-4f6b7c8d9e0f"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)


def bound(device: dict[str, Any], tmp_path: Path) -> dict[str, str | None]:
    spec = parse_spec({"schema_version": 1, "model": {"name": "resnet50"},
                       "device": device}, "spec.json", tmp_path)
    binding = bind_device(spec.device)
    assert binding.cuda_visible_devices == os.environ.get("CUDA_VISIBLE_DEVICES")
    return {key: os.environ.get(key) for key in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")}


def test_a_gpu_uuid_is_what_cuda_sees(tmp_path: Path) -> None:
    assert bound({"kind": "gpu", "uuid": GPU_2}, tmp_path) == {
        "CUDA_VISIBLE_DEVICES": GPU_2, "CUDA_DEVICE_ORDER": None}


def test_a_mig_device_of_a_vgpu_goes_by_its_mig_uuid(tmp_path: Path) -> None:
    assert bound({"kind": "mig", "uuid": MIG_IN_VGPU}, tmp_path) == {
        "CUDA_VISIBLE_DEVICES": MIG_IN_VGPU, "CUDA_DEVICE_ORDER": None}


def test_an_index_counts_gpus_in_pci_bus_order_like_nvml(tmp_path: Path) -> None:
    assert bound({"kind": "gpu", "index": 2}, tmp_path) == {
        "CUDA_VISIBLE_DEVICES": "2", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def test_a_gpu_uuid_must_look_like_one(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec({"schema_version": 1, "model": {"name": "resnet50"},
                    "device": {"kind": "gpu", "uuid": "2"}}, "spec.json", tmp_path)
    [problem] = caught.value.problems
    assert problem.field == "device.uuid"
    assert problem.fix is not None and "GPU-... or MIG-..." in problem.fix

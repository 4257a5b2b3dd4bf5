from __future__ import annotations

from tests.bench.nvml_simulator import SimulatedGpu, SimulatedNvml
from vgpu.bench.devices import LocalDevice, discover

A100 = "NVIDIA A100 80GB PCIe"


def test_mig_devices_are_preferred_and_empty_slots_skipped() -> None:
    nvml = SimulatedNvml([
        SimulatedGpu(A100, "GPU-aaaaaaaa-1111", ["4g.40gb", None, "2g.20gb", "1g.10gb"]),
        SimulatedGpu("NVIDIA T4", "GPU-bbbbbbbb-2222", mig_capable=False),
    ])
    found = discover(nvml)
    assert [(d.kind, d.mig_profile) for d in found] == [
        ("mig", "4g.40gb"), ("mig", "2g.20gb"), ("mig", "1g.10gb")]
    assert found[1].uuid == "MIG-aaaaaaaa-0002"
    assert found[1].name == f"MIG 2g.20gb on {A100}"
    assert found[0].harness_device() == {"kind": "mig", "uuid": "MIG-aaaaaaaa-0000"}
    assert nvml.initialised == 0  # shut down again


def test_whole_gpus_when_no_mig() -> None:
    nvml = SimulatedNvml([SimulatedGpu(A100, "GPU-1"), SimulatedGpu(A100, "GPU-2")])
    found = discover(nvml)
    assert [(d.kind, d.index) for d in found] == [("gpu", 0), ("gpu", 1)]
    assert found[1].harness_device() == {"kind": "gpu", "index": 1}


def test_cpu_when_nvml_is_missing_or_has_no_gpu() -> None:
    assert discover(SimulatedNvml([], driver_loaded=False)) == [LocalDevice("cpu", "CPU")]
    assert discover(SimulatedNvml([])) == [LocalDevice("cpu", "CPU")]
    assert discover(SimulatedNvml([]))[0].harness_device() == {"kind": "cpu"}

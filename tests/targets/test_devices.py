"""Device discovery through the GpuBackend. This machine's path (no backend given) runs the
real NvmlBackend over PynvmlSimulator installed as `pynvml`; the GPU simulator's own path
passes SimulatedGpuBackend, or asks for it with VGPU_GPU_SIMULATOR."""

from __future__ import annotations

import sys
from pathlib import Path

import pynvml
import pytest

from tests.labs.pynvml_simulator import PynvmlSimulator
from vgpu import catalog, mig
from vgpu.nvml.from_plan import layouts_from_plan
from vgpu.nvml.layout import apply_layout
from vgpu.nvml.simulator import SimulatedGpuBackend
from vgpu.nvml.state import StateStore
from vgpu.planner import build_plan
from vgpu.targets.devices import LocalDevice, discover

A100 = mig.GPU_MODELS["A100-80GB"].display_name
CPU = [LocalDevice("cpu", "CPU")]


@pytest.fixture(autouse=True)
def no_simulator_asked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("VGPU_GPU_SIMULATOR", raising=False)
    monkeypatch.delenv("VGPU_GPU_SIMULATOR_STATE", raising=False)
    monkeypatch.setenv("VGPU_STATE_DIR", str(tmp_path / "layouts"))


def as_this_machines_nvml(monkeypatch: pytest.MonkeyPatch, sim: SimulatedGpuBackend,
                          driver_loaded: bool = True) -> PynvmlSimulator:
    nvml = PynvmlSimulator(sim, driver_loaded=driver_loaded)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    return nvml


def cut(sim: SimulatedGpuBackend, profile_id: int, start: int, size: int) -> int:
    gi = sim.create_gpu_instance(0, profile_id, start, size)
    sim.create_compute_instance(0, gi.id)
    return gi.id


def remove(sim: SimulatedGpuBackend, gi_id: int) -> None:
    [gi] = [gi for gi in sim.gpu_instances(0) if gi.id == gi_id]
    for ci in gi.compute_instances:
        sim.destroy_compute_instance(0, gi_id, ci.id)
    sim.destroy_gpu_instance(0, gi_id)


def test_mig_devices_are_preferred_and_empty_slots_skipped(
        monkeypatch: pytest.MonkeyPatch) -> None:
    sim = SimulatedGpuBackend(["A100-80GB", "T4"], mig_enabled=True)
    nvml = as_this_machines_nvml(monkeypatch, sim)
    cut(sim, 5, 0, 4)  # 4g.40gb
    ones = [cut(sim, 19, start, 1) for start in (4, 5, 6)]  # 1g.10gb
    assert len(discover()) == 4  # MIG device slots 0..3 taken
    remove(sim, ones[0])
    remove(sim, ones[1])
    cut(sim, 14, 4, 2)  # 2g.20gb
    found = discover()
    assert not nvml.initialised  # shut down again
    nvml.nvmlInit()
    with pytest.raises(pynvml.NVMLError_NotFound):  # the slot discovery skipped
        nvml.nvmlDeviceGetMigDeviceHandleByIndex(nvml.nvmlDeviceGetHandleByIndex(0), 2)
    assert [(d.kind, d.mig_profile) for d in found] == [
        ("mig", "4g.40gb"), ("mig", "2g.20gb"), ("mig", "1g.10gb")]
    uuids = {d.profile: d.uuid for d in sim.mig_devices(0)}
    assert found[1].uuid == uuids["2g.20gb"]
    assert found[1].name == f"MIG 2g.20gb on {A100}"
    assert found[0].harness_device() == {"kind": "mig", "uuid": uuids["4g.40gb"]}


def test_whole_gpus_when_no_mig(monkeypatch: pytest.MonkeyPatch) -> None:
    sim = SimulatedGpuBackend(["A100-80GB", "T4"])
    as_this_machines_nvml(monkeypatch, sim)
    found = discover()
    assert [(d.kind, d.index) for d in found] == [("gpu", 0), ("gpu", 1)]
    assert [(d.name, d.uuid) for d in found] == [(A100, sim.gpus()[0].uuid),
                                                 ("Tesla T4", sim.gpus()[1].uuid)]
    assert found[1].harness_device() == {"kind": "gpu", "uuid": sim.gpus()[1].uuid}


def test_cpu_when_nvml_is_missing_or_has_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    as_this_machines_nvml(monkeypatch, SimulatedGpuBackend(["A100-80GB"]), driver_loaded=False)
    assert discover() == CPU
    no_gpu = as_this_machines_nvml(monkeypatch, SimulatedGpuBackend([]))
    assert discover() == CPU
    assert not no_gpu.initialised
    assert discover()[0].harness_device() == {"kind": "cpu"}
    assert discover(SimulatedGpuBackend([])) == CPU


def bm6_applied(sim: SimulatedGpuBackend, tmp_path: Path) -> None:
    [layout] = layouts_from_plan(build_plan(catalog.load("bm6")))
    apply_layout(sim, layout, StateStore(directory=tmp_path / "layouts"))


def test_simulated_mig_devices_carry_their_owner_and_run_on_the_cpu(tmp_path: Path) -> None:
    sim = SimulatedGpuBackend(["A100-80GB"], mig_enabled=True)
    bm6_applied(sim, tmp_path)
    found = discover(sim)
    assert [(d.kind, d.mig_profile, d.owner, d.simulated) for d in found] == [
        ("mig", "4g.40gb", "bm6-4g", True), ("mig", "2g.20gb", "bm6-2g", True),
        ("mig", "1g.10gb", "bm6-1g", True)]
    assert [d.uuid for d in found] == [d.uuid for d in sim.mig_devices(0)]
    assert found[0].name == "simulated MIG 4g.40gb (GPU simulator; the CPU does the work)"
    assert [d.harness_device() for d in found] == [{"kind": "cpu"}] * 3


def test_a_simulated_gpu_without_mig_devices_offers_the_cpu() -> None:
    assert discover(SimulatedGpuBackend(["A100-80GB", "T4"])) == CPU
    assert discover(SimulatedGpuBackend(["A100-80GB"], mig_enabled=True)) == CPU


def test_the_simulator_only_when_asked_for(monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    state = tmp_path / "simgpu.json"
    bm6_applied(SimulatedGpuBackend(["A100-80GB"], state_file=state, mig_enabled=True),
                tmp_path)
    as_this_machines_nvml(monkeypatch, SimulatedGpuBackend([]), driver_loaded=False)
    monkeypatch.setenv("VGPU_GPU_SIMULATOR_STATE", str(state))
    assert discover() == CPU
    monkeypatch.setenv("VGPU_GPU_SIMULATOR", "A100-80GB")
    assert [(d.owner, d.simulated) for d in discover()] == [
        ("bm6-4g", True), ("bm6-2g", True), ("bm6-1g", True)]


def test_a_mig_backed_vgpu_guest_offers_the_mig_device_under_its_vgpu(
        monkeypatch: pytest.MonkeyPatch) -> None:
    sim = SimulatedGpuBackend.mig_backed_vgpu_guest(["A100D-1-10C"])
    as_this_machines_nvml(monkeypatch, sim)
    [vgpu], [mig_device] = sim.gpus(), sim.mig_devices(0)
    assert vgpu.name == "GRID A100D-1-10C (simulated)"
    found = discover()
    assert [(d.kind, d.mig_profile, d.uuid) for d in found] == [
        ("mig", "1g.10gb", mig_device.uuid)]
    assert found[0].name == "MIG 1g.10gb on GRID A100D-1-10C"
    assert found[0].harness_device() == {"kind": "mig", "uuid": mig_device.uuid}
    assert mig_device.uuid.startswith("MIG-") and mig_device.uuid != vgpu.uuid

from __future__ import annotations

from pathlib import Path

from vgpu import catalog
from vgpu.targets.devices import LocalDevice, cpu_device
from vgpu.targets.local import local_targets

A100 = "NVIDIA A100 80GB PCIe"


def test_cpu_only_follows_the_scenario_plan_and_splits_the_cores(tmp_path: Path) -> None:
    targets, notes = local_targets(catalog.load("8"), [cpu_device()], tmp_path / "w", cores=8)
    assert [t.instance for t in targets] == [f"s8-1g-{n}" for n in range(1, 8)]
    assert {t.threads for t in targets} == {1}  # 8 cores // 7 instances
    assert {t.device_label for t in targets} == {"CPU, no MIG slice (planned 1g.10gb)"}
    assert {t.target_kind for t in targets} == {"local"}
    assert "no GPU or MIG slice is used" in notes[0]


def test_bare_metal_scenario_run_here_is_stored_as_bare_metal(tmp_path: Path) -> None:
    targets, _notes = local_targets(catalog.load("bm6"), [cpu_device()], tmp_path / "w")
    assert [(t.instance, t.planned_slice, t.target_kind) for t in targets] == [
        ("bm6-4g", "4g.40gb", "bare-metal"), ("bm6-2g", "2g.20gb", "bare-metal"),
        ("bm6-1g", "1g.10gb", "bare-metal")]


def test_one_instance_per_mig_device_when_there_are_some(tmp_path: Path) -> None:
    devices = [LocalDevice("mig", f"MIG {p} on {A100}", uuid=f"MIG-{n}", mig_profile=p)
               for n, p in enumerate(("3g.40gb", "3g.40gb"))]
    targets, notes = local_targets(catalog.load("6"), devices, tmp_path / "w")
    assert [(t.instance, t.device) for t in targets] == [
        ("mig0-3g.40gb", {"kind": "mig", "uuid": "MIG-0"}),
        ("mig1-3g.40gb", {"kind": "mig", "uuid": "MIG-1"})]
    assert all(t.threads is None for t in targets)
    assert notes == ["this machine: one instance per MIG device (3g.40gb, 3g.40gb); the "
                     "scenario plans 4g.40gb, 2g.20gb, 1g.10gb"]


def test_a_simulated_gpu_paces_each_instance_by_its_planned_slices(tmp_path: Path) -> None:
    from vgpu.targets.local import SIM_DEVICE_SLICES

    targets, notes = local_targets(catalog.load("6"), [cpu_device()], tmp_path / "w",
                                   cores=2, simulated_gpu=True)
    assert [(t.instance, t.env) for t in targets] == [
        ("s6-4g", {SIM_DEVICE_SLICES: "4"}), ("s6-2g", {SIM_DEVICE_SLICES: "2"}),
        ("s6-1g", {SIM_DEVICE_SLICES: "1"})]
    assert targets[0].device == {"kind": "cpu"}  # the CPU computes
    assert targets[0].device_label == "SIMULATED GPU, 4 slice(s) (planned 4g.40gb)"
    assert any("SIMULATED GPU" in note and "no GPU is measured" in note for note in notes)
    plain, _ = local_targets(catalog.load("6"), [cpu_device()], tmp_path / "w", cores=2)
    assert all(t.env == {} for t in plain)


def test_simulated_slices_follow_the_profile() -> None:
    from vgpu.targets.local import simulated_slices

    assert simulated_slices("3g.40gb") == 3
    assert simulated_slices("passthrough") == 7
    assert simulated_slices("1g.10gb+1g.10gb") == 2
    assert simulated_slices("A100D-20C", time_sliced_sharers=4) == 1  # 7 // 4
    assert simulated_slices("A100D-40C", time_sliced_sharers=2) == 3

"""`vgpu preflight / apply / destroy` end to end: the real scenario files, an inventory
written for the simulator lab, and checks read back from vCenter with pyvmomi."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.invoke import run_cli
from tests.labs.vcsim import VcsimLab, lab_available
from vgpu.sim.lab import LabShape
from vgpu.vsphere.connect.connection import connect
from vgpu.vsphere.plan.reconcile import read_state

pytestmark = [pytest.mark.vcsim,
              pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))]

REPO = Path(__file__).resolve().parents[3]
SCENARIO_8 = str(REPO / "scenarios" / "mig_7x1g.yaml")
SCENARIO_1 = str(REPO / "scenarios" / "mig_1x7g.yaml")


def vms_of(lab: VcsimLab) -> dict[str, object]:
    with connect(lab.target()) as session:
        return read_state(session, lab.placement_names()).vms  # type: ignore[return-value]


def test_scenario_8_applies_seven_mig_vms_reapplies_as_no_op_and_destroys_only_its_own(
    vcsim_lab: VcsimLab, tmp_path: Path,
) -> None:
    inventory = str(vcsim_lab.write_inventory(tmp_path / "inv.yaml"))
    # Another host than the scenario's: on DC0_C0_H0 the running vGPU VM would forbid the
    # Xorg restart the scenario's assignment policy needs (plan/test_gpu_placement.py).
    vcsim_lab.make_foreign_vm("team-b-vm", "DC0_C0_H1", ("grid_a100d-2-20c",))

    code, out, err = run_cli(["apply", "--no-provision", SCENARIO_8, "-i", inventory, "--yes"])
    assert code == 0, err
    assert "7 to create" in out and "7 of 7 VM(s) done" in out

    vms = vms_of(vcsim_lab)
    names = [f"s8-1g-{n}" for n in range(1, 8)]
    for n, name in enumerate(names):
        vm = vms[name]
        assert vm.vgpus == ("grid_a100d-1-10c",)  # type: ignore[attr-defined]
        assert vm.firmware == "efi"  # type: ignore[attr-defined]
        assert vm.memory_reservation_locked  # type: ignore[attr-defined]
        assert vm.powered_on  # type: ignore[attr-defined]
        assert vm.ip == f"127.0.0.{11 + n}"  # type: ignore[attr-defined]
        extra = vm.extra_config  # type: ignore[attr-defined]
        assert extra["pciPassthru.use64bitMMIO"] == "TRUE"
        assert extra["pciPassthru.64bitMMIOSizeGB"] == "64"
        assert extra["pciPassthru.allowP2P"] == "TRUE"
        assert extra["pciPassthru.RelaxACSforP2P"] == "TRUE"
        assert extra["vgpu.owner"] == "vgpu" and extra["vgpu.scenario"] == "8"

    tasks = vcsim_lab.recent_tasks()
    code, out, err = run_cli(["apply", "--no-provision", SCENARIO_8, "-i", inventory])
    assert code == 0, err
    assert "0 to create, 0 to change, 7 to keep, 0 to delete" in out
    assert "nothing to change" in out
    assert vcsim_lab.recent_tasks() == tasks

    code, out, err = run_cli(["destroy", "--scenario", "8", "-i", inventory, "--yes"])
    assert code == 0, err
    assert "7 to delete" in out
    remaining = vms_of(vcsim_lab)
    assert not set(names) & set(remaining)
    foreign = remaining["team-b-vm"]
    assert foreign.powered_on and foreign.vgpus == ("grid_a100d-2-20c",)  # type: ignore[attr-defined]


def test_dry_run_shows_the_plan_and_changes_nothing(vcsim_lab: VcsimLab, tmp_path: Path) -> None:
    inventory = str(vcsim_lab.write_inventory(tmp_path / "inv.yaml"))
    tasks = vcsim_lab.recent_tasks()
    code, out, _ = run_cli(["apply", "--scenario", "6", "-i", inventory, "--dry-run"])
    assert code == 0
    assert "3 to create" in out and "dry run: nothing changed" in out
    assert "grid_a100d-4-40c" in out and "grid_a100d-2-20c" in out
    assert vcsim_lab.recent_tasks() == tasks
    assert set(vms_of(vcsim_lab)) == {"vgpu-template"}


def test_seven_g_is_refused_before_any_change_when_a_foreign_4g_holds_the_only_gpu(
    tmp_path: Path,
) -> None:
    with VcsimLab(LabShape(hosts=1, gpus_per_host=1)) as lab:
        lab.make_foreign_vm("other-team-4g", "DC0_C0_H0", ("grid_a100d-4-40c",))
        inventory = str(lab.write_inventory(tmp_path / "inv.yaml"))
        tasks = lab.recent_tasks()

        code, out, err = run_cli(["preflight", "-i", inventory, SCENARIO_1,
                                  "--results-dir", str(tmp_path / "pf")])
        assert code == 1
        assert "4g.40gb (other-team-4g)" in out
        assert "no room for VM s1-7g (7g.80gb)" in err

        code, out, err = run_cli(["apply", "--no-provision", SCENARIO_1, "-i", inventory, "--yes"])
        assert code == 2
        assert "no room for VM s1-7g (7g.80gb)" in err
        assert "other-team-4g (4g.40gb on DC0_C0_H0 GPU 0)" in err
        assert lab.recent_tasks() == tasks
        assert set(vms_of(lab)) == {"vgpu-template", "other-team-4g"}


def test_preflight_reports_esxi_8_four_a100s_and_shared_direct_and_stores_facts(
    vcsim_lab: VcsimLab, tmp_path: Path,
) -> None:
    inventory = str(vcsim_lab.write_inventory(tmp_path / "inv.yaml"))
    results = tmp_path / "preflight"
    code, out, err = run_cli(["preflight", "-i", inventory, "--scenario", "8",
                              "--results-dir", str(results)])
    assert code == 0, err
    assert "8.0.2 (22380479)" in out
    assert "4 x A100-80GB" in out and "Shared Direct" in out
    assert "verdict: PASS" in out
    [saved] = list(results.glob("preflight-*-scenario-8.json"))
    facts = json.loads(saved.read_text())
    assert facts["ok"] is True
    host = facts["hosts"][0]
    assert (host["name"], host["version"], host["graphics_default_type"]) == (
        "DC0_C0_H0", "8.0.2", "sharedDirect")
    assert [g["model"] for g in host["gpus"]] == ["A100-80GB"] * 4
    assert "grid_a100d-1-10c" in host["mig_types"]


def test_preflight_fails_with_reasons_on_hosts_without_gpus_or_vgpu_types(
    tmp_path: Path,
) -> None:
    with VcsimLab(LabShape(hosts=3, no_vgpu_hosts=1, no_gpu_hosts=1)) as lab:
        inventory = str(lab.write_inventory(tmp_path / "inv.yaml",
                                            hosts=lab.host_names()))
        code, out, err = run_cli(["preflight", "-i", inventory,
                                  "--results-dir", str(tmp_path / "pf")])
    assert code == 1
    assert "DC0_C0_H1: vGPU types: none offered: install the NVIDIA AI Enterprise host " \
           "driver" in err
    assert "DC0_C0_H2: GPUs: no NVIDIA GPU in the host's PCI device list" in err
    assert "DC0_C0_H0" not in err
    assert "verdict: FAIL" in out


def test_apply_without_yes_and_without_a_terminal_changes_nothing(
    vcsim_lab: VcsimLab, tmp_path: Path,
) -> None:
    inventory = str(vcsim_lab.write_inventory(tmp_path / "inv.yaml"))
    code, _, err = run_cli(["apply", "--no-provision", "--scenario", "5", "-i", inventory])
    assert code == 2
    assert "pass --yes" in err
    assert set(vms_of(vcsim_lab)) == {"vgpu-template"}


def test_bare_metal_scenario_on_a_vsphere_inventory_is_refused_by_apply(
    vcsim_lab: VcsimLab, tmp_path: Path,
) -> None:
    inventory = str(vcsim_lab.write_inventory(tmp_path / "inv.yaml"))
    tasks = vcsim_lab.recent_tasks()
    code, _, err = run_cli(["apply", "--no-provision",
                            str(REPO / "scenarios" / "bm_mig_7x1g.yaml"), "-i", inventory,
                            "--yes"])
    assert code == 2
    assert "bare_metal: no host has a A100-80GB GPU" in err
    assert vcsim_lab.recent_tasks() == tasks


def test_passthrough_training_vm_gets_two_whole_gpus_by_pci_address(
    vcsim_lab: VcsimLab, tmp_path: Path,
) -> None:
    inventory = str(vcsim_lab.write_inventory(tmp_path / "inv.yaml"))
    scenario = str(REPO / "scenarios" / "train_1vm_2gpu.yaml")
    code, _, err = run_cli(["apply", "--no-provision", scenario, "-i", inventory, "--yes"])
    assert code == 0, err
    vm = vms_of(vcsim_lab)["train-1vm-2gpu"]
    backings = sorted((d.backing.id, d.backing.vendorId, d.backing.deviceId)  # type: ignore[attr-defined]
                      for d in vm.passthrough_devices)  # type: ignore[attr-defined]
    assert backings == [("0000:17:00.0", 0x10DE, "20b5"), ("0000:37:00.0", 0x10DE, "20b5")]
    assert all(d.backing.systemId for d in vm.passthrough_devices)  # type: ignore[attr-defined]
    assert vm.vgpus == ()  # type: ignore[attr-defined]
    assert vm.extra_config["pciPassthru.64bitMMIOSizeGB"] == "512"  # type: ignore[attr-defined]
    code, out, _ = run_cli(["apply", "--no-provision", scenario, "-i", inventory])
    assert code == 0 and "nothing to change" in out


def test_plan_avoids_a_host_in_maintenance_and_preflight_names_an_absent_host(
    vcsim_lab: VcsimLab, tmp_path: Path,
) -> None:
    inventory = str(vcsim_lab.write_inventory(
        tmp_path / "inv.yaml", hosts=["DC0_C0_H0", "DC0_C0_H1", "esx-gone"]))
    vcsim_lab.set_maintenance("DC0_C0_H0", True)
    code, out, err = run_cli(["preflight", "-i", inventory, "--scenario", "8",
                              "--results-dir", str(tmp_path / "pf")])
    assert code == 1
    assert "esx-gone: in vCenter: not found; the cluster has: DC0_C0_H0, DC0_C0_H1" in err
    assert "DC0_C0_H0:" not in err and "planned hosts" not in err
    assert "in maintenance mode: the plan does not use this host" in out

    code, out, err = run_cli(["apply", "--no-provision", "--scenario", "8", "-i", inventory,
                              "--dry-run"])
    assert code == 0, err
    policy = "host DC0_C0_H1: GPU assignment policy performance -> consolidation"
    assert policy in out and "7 to create" in out
    assert out.replace(policy, "").count("DC0_C0_H1") == 7


def test_plan_says_the_only_host_that_fits_is_in_maintenance(
    vcsim_lab: VcsimLab, tmp_path: Path,
) -> None:
    inventory = str(vcsim_lab.write_inventory(tmp_path / "inv.yaml", hosts=["DC0_C0_H0"]))
    vcsim_lab.set_maintenance("DC0_C0_H0", True)
    tasks = vcsim_lab.recent_tasks()
    code, _, err = run_cli(["apply", "--no-provision", "--scenario", "8", "-i", inventory,
                            "--yes"])
    assert code == 2
    assert "no room for VM s8-1g-1 (1g.10gb) on 1 host(s); not used: host DC0_C0_H0 is in " \
           "maintenance mode" in err
    assert "exit maintenance mode on DC0_C0_H0" in err
    assert vcsim_lab.recent_tasks() == tasks


def test_whole_gpu_inference_vm_gets_four_gpus_by_pci_address_and_mmio_for_four(
    vcsim_lab: VcsimLab, tmp_path: Path,
) -> None:
    inventory = str(vcsim_lab.write_inventory(tmp_path / "inv.yaml"))
    code, _, err = run_cli(["apply", "--no-provision", "--scenario", "pt4", "-i", inventory,
                            "--yes"])
    assert code == 0, err
    vm = vms_of(vcsim_lab)["pt4-vm"]
    ids = sorted(d.backing.id for d in vm.passthrough_devices)  # type: ignore[attr-defined]
    assert len(ids) == 4 and len(set(ids)) == 4
    assert vm.vgpus == ()  # type: ignore[attr-defined]
    assert vm.extra_config["pciPassthru.64bitMMIOSizeGB"] == "1024"  # type: ignore[attr-defined]

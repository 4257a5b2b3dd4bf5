"""Where ESXi puts vGPU VMs, on the simulator lab: the host's GPU assignment policy decides
it at power-on (performance spreads, consolidation fills a GPU first), apply sets
consolidation where the plan shares a GPU and restarts Xorg for it to take effect (refused
while vGPU VMs run there) and reads the real placement back, and one GPU's
tenants power on one at a time, largest first, so MIG instances do not fragment."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

import pytest
import yaml

from tests.cli.invoke import run_cli
from tests.labs.vcsim import VcsimLab, lab_available
from vgpu.model.load import load_inventory, load_scenario
from vgpu.planner import build_plan
from vgpu.sim.lab import LabShape, gpu_pci_ids
from vgpu.vsphere.apply.execute import Executor
from vgpu.vsphere.connect.connection import connect
from vgpu.vsphere.plan.gpu_placement import placement_mismatches
from vgpu.vsphere.plan.reconcile import read_state
from vgpu.vsphere.plan.workflow import prepare_apply
from vgpu.vsphere.read.facts import GpuDevice, HostFacts, VmActual

pytestmark = [pytest.mark.vcsim,
              pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))]

REPO = Path(__file__).resolve().parents[3]
SCENARIO_8 = REPO / "scenarios" / "mig_7x1g.yaml"
HOST = "DC0_C0_H0"


def vms_per_gpu(lab: VcsimLab, host: str = HOST) -> dict[str, tuple[str, ...]]:
    """PCI id -> the VMs the host lists on that GPU (graphicsInfo[].vm), in its order."""
    with connect(lab.target()) as session:
        return read_state(session, lab.placement_names()).hosts[host].vms_per_gpu


def policy_of(lab: VcsimLab, host: str = HOST) -> str | None:
    with connect(lab.target()) as session:
        return read_state(session, lab.placement_names()).hosts[host].assignment_policy


def apply_without_policy(lab: VcsimLab, scenario: Path, inventory: Path) -> None:
    """Build the scenario's VMs as apply did before it set the assignment policy."""
    with connect(lab.target()) as session:
        prep = prepare_apply(session, load_scenario(scenario), load_inventory(inventory),
                             inventory)
        report = Executor(prep.state.placement, prep.state.hosts).run(prep.changes)
    assert report.failed == []


def test_seven_1g_vms_spread_under_performance_and_share_gpu_0_once_apply_consolidates(
    tmp_path: Path,
) -> None:
    with VcsimLab(LabShape(hosts=1)) as lab:
        inventory = lab.write_inventory(tmp_path / "inv.yaml")
        code, out, err = run_cli(["preflight", "-i", str(inventory), "--scenario", "8",
                                  "--results-dir", str(tmp_path / "pf"), "--json"])
        assert code == 0, err
        report = json.loads(out)
        assert report["hosts"][0]["assignment_policy"] == "performance"
        policy = next(c for c in report["scenario_checks"]
                      if c["name"] == "GPU assignment policy")
        assert "performance, which spreads VMs over GPUs" in policy["detail"]
        assert "`vgpu apply` sets consolidation" in policy["detail"]

        # ESXi's default spreads the scenario's VMs: 2/2/2/1 over the four GPUs.
        apply_without_policy(lab, SCENARIO_8, inventory)
        spread = vms_per_gpu(lab)
        assert sorted(len(v) for v in spread.values()) == [1, 2, 2, 2]

        # The policy takes effect only once Xorg restarts, which the running vGPU VMs
        # forbid: a dry run says so, and apply refuses, naming them, before anything changes.
        code, out, err = run_cli(["apply", "--no-provision", str(SCENARIO_8), "-i",
                                  str(inventory), "--dry-run"])
        assert code == 0, err
        assert "note: apply would refuse: host DC0_C0_H0: GPU assignment policy " \
            "performance -> consolidation takes effect only after Xorg restarts" \
            in " ".join(out.split())
        code, out, err = run_cli(["apply", "--no-provision", str(SCENARIO_8), "-i",
                                  str(inventory), "--yes"])
        assert code == 1
        assert f"host {HOST}: GPU assignment policy performance -> consolidation" in out
        assert "takes effect only after Xorg restarts" in err
        assert "s8-1g-1, s8-1g-2, s8-1g-3, s8-1g-4, s8-1g-5, s8-1g-6, s8-1g-7" in err
        assert "Nothing was changed. Shut them down (or drain the host with `vgpu drain`)" \
            in err
        assert policy_of(lab) == "performance"
        assert vms_per_gpu(lab) == spread
        assert lab.xorg(HOST) == {"running": True, "restarts": 0,
                                  "active_policy": "performance"}

        # Rebuilt under consolidation, the seven share GPU 0 as planned.
        code, _, err = run_cli(["destroy", "--scenario", "8", "-i", str(inventory), "--yes"])
        assert code == 0, err
        assert all(not v for v in vms_per_gpu(lab).values())
        code, out, err = run_cli(["apply", "--no-provision", str(SCENARIO_8), "-i",
                                  str(inventory), "--yes"])
        assert code == 0, err
        assert f"set {HOST}: GPU assignment policy = consolidation" in out
        assert f"{HOST}: Xorg restarted (GPU assignment policy performance -> " \
            "consolidation in effect)" in out
        assert "the VMs share GPUs as planned" in out
        assert lab.xorg(HOST) == {"running": True, "restarts": 1,
                                  "active_policy": "consolidation"}
        placed = vms_per_gpu(lab)
        gpu0 = gpu_pci_ids(1)[0]
        assert sorted(placed[gpu0]) == [f"s8-1g-{n}" for n in range(1, 8)]
        assert all(not placed[p] for p in gpu_pci_ids(4)[1:])


def small_first_scenario(tmp_path: Path) -> Path:
    """One GPU shared by three 1g VMs listed first and a 4g listed last."""
    data = yaml.safe_load((REPO / "scenarios" / "mig_4g_2g_1g.yaml").read_text())
    data["id"], data["name"] = "frag", "fragmentation"
    data["vms"] = [
        {"name": "frag-1g-{n}", "count": 3, "vcpu": 8, "memory_gb": 16,
         "vgpus": ["nvidia-1-10c"]},
        {"name": "frag-4g", "vcpu": 8, "memory_gb": 16, "vgpus": ["nvidia-4-40c"]},
    ]
    data.pop("baseline", None)
    path = tmp_path / "frag.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def power_on_history(lab: VcsimLab) -> list[tuple[str, object, object]]:
    """(VM, start, end) of every successful power-on task, in start order."""
    with connect(lab.target()) as session:
        infos = [t.info for t in session.content.taskManager.recentTask]
        names = {vm.ref._moId: name
                 for name, vm in read_state(session, lab.placement_names()).vms.items()}
    done = [i for i in infos if i.descriptionId == "VirtualMachine.powerOn"
            and i.state == "success"]
    return sorted(((names[i.entity._moId], i.startTime, i.completeTime) for i in done),
                  key=lambda item: item[1])


def test_one_gpus_tenants_power_on_one_at_a_time_largest_first(tmp_path: Path) -> None:
    # Each vGPU power-on takes a while in the lab, so concurrent ones would overlap; the
    # lab places MIG instances at the lowest free start, so a 1g first would block the 4g.
    with VcsimLab(LabShape(hosts=1, gpus_per_host=1, vgpu_power_on_ms=300)) as lab:
        inventory = lab.write_inventory(tmp_path / "inv.yaml")
        scenario = small_first_scenario(tmp_path)
        code, out, err = run_cli(["apply", "--no-provision", str(scenario), "-i",
                                  str(inventory), "--yes", "--concurrency", "8"])
        assert code == 0, err + out
        history = power_on_history(lab)
        assert [vm for vm, _, _ in history] == ["frag-4g", "frag-1g-1", "frag-1g-2",
                                                "frag-1g-3"]
        for (_, _, ended), (_, started, _) in pairwise(history):
            assert started >= ended  # serial: each starts once the previous is done
        assert vms_per_gpu(lab)[gpu_pci_ids(1)[0]] == (
            "frag-4g", "frag-1g-1", "frag-1g-2", "frag-1g-3")


def test_held_vgpus_of_running_vms_count_on_the_gpu_the_host_lists_them_on(
    vcsim_lab: VcsimLab, tmp_path: Path,
) -> None:
    # Under ESXi's default policy two foreign 1g VMs land on GPUs 0 and 1.
    vcsim_lab.make_foreign_vm("team-b-1", HOST, ("grid_a100d-1-10c",))
    vcsim_lab.make_foreign_vm("team-b-2", HOST, ("grid_a100d-1-10c",))
    inventory = vcsim_lab.write_inventory(tmp_path / "inv.yaml")
    code, out, err = run_cli(["preflight", "-i", str(inventory), "--results-dir",
                              str(tmp_path / "pf"), "--json"])
    assert code == 0, err
    gpus = json.loads(out)["hosts"][0]["gpus"]
    listed = {name: pci for pci, names in vms_per_gpu(vcsim_lab).items() for name in names}
    for gpu in gpus:
        assert gpu["held"] == [f"1g.10gb ({vm})" for vm, pci in sorted(listed.items())
                               if pci == gpu["pci_id"]]
    assert len({listed["team-b-1"], listed["team-b-2"]}) == 2


def test_plan_says_which_hosts_need_consolidation() -> None:
    code, out, err = run_cli(["plan", "--scenario", "8", "-i", "inventory/sim.yaml"])
    assert code == 0, err
    assert "GPU assignment policy on DC0_C0_H0: consolidation (the plan shares GPU 0 " \
           "(s8-1g-1, s8-1g-2" in " ".join(out.split())
    code, out, err = run_cli(["plan", "--scenario", "pt4", "-i", "inventory/sim.yaml"])
    assert code == 0, err
    assert "GPU assignment policy: any" in out


def read_back(names_per_gpu: list[tuple[str, ...]]) -> list[str]:
    """The mismatches of scenario 8's plan (all seven on GPU 0) against a host that lists
    the VMs per GPU as given."""
    inventory = load_inventory(REPO / "inventory" / "sim.yaml")
    plan = build_plan(load_scenario(SCENARIO_8), inventory)
    pcis = gpu_pci_ids(len(names_per_gpu))
    facts = HostFacts(name=HOST, connection_state="connected", in_maintenance=False,
                      version="8.0.2", build="22380479", full_name=None,
                      gpus=[GpuDevice(p, 0x10DE, 0x20B5, "A100") for p in pcis],
                      vgpu_types=[], graphics_default_type="sharedDirect",
                      vms_per_gpu=dict(zip(pcis, names_per_gpu, strict=True)))
    vms = {vm.name: VmActual(vm.name, None, HOST, True, 4, 8192, "efi", True, None, False,
                             {}, ("grid_a100d-1-10c",), (), (), (), None, False)
           for vm in plan.vms}
    return [m.describe() for m in placement_mismatches(plan, inventory, {HOST: facts}, vms)]


def test_the_read_back_holds_the_plans_sharing_not_esxis_gpu_numbers() -> None:
    seven = tuple(f"s8-1g-{n}" for n in range(1, 8))
    assert read_back([seven, (), (), ()]) == []
    # ESXi numbered the GPU it filled otherwise: the seven still share one GPU.
    assert read_back([(), (), seven, ()]) == []
    [split] = read_back([(), (), seven[:6], seven[6:]])
    gpu0, _, _, gpu3 = gpu_pci_ids(4)
    assert split == (f"VM s8-1g-7: planned on GPU 0 ({gpu0}) of {HOST}, ESXi put it on "
                     f"GPU 3 ({gpu3})")
    [missing] = read_back([seven[1:], (), (), ()])
    assert missing.endswith("ESXi put it on no GPU the host lists")

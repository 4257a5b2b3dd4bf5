"""Host driver facts, the driver branch check and `vgpu preflight --against` (drift), read
from the simulator lab: a normal lab, then an "upgraded" one (other build, other VIB, a
vGPU type removed) checked against the facts saved from the first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyVmomi import vim

from tests.cli.invoke import run_cli
from tests.labs.vcsim import VcsimLab, lab_available
from vgpu.sim.lab import VIB_NAME, VIB_VERSION, LabShape
from vgpu.vsphere.connect.connection import connect
from vgpu.vsphere.plan.reconcile import read_state
from vgpu.vsphere.preflight.checks import Check, GpuUsage, HostReport, PreflightReport
from vgpu.vsphere.preflight.drift import compute_drift
from vgpu.vsphere.read.facts import read_host_drivers

pytestmark = [pytest.mark.vcsim,
              pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))]

NEW_BUILD = "24022510"
NEW_VIB = "535.183.01-1OEM.800.1.0.20613240"  # same 535 branch, newer release
REMOVED = "grid_a100d-1-10c"  # scenario 8 (7 x 1g.10gb) uses it; scenario 1 (7g) does not


def test_host_driver_vib_graphics_and_passthrough_are_read_per_host(tmp_path: Path) -> None:
    with VcsimLab(LabShape(hosts=3, no_vgpu_hosts=1, disconnected=(1,))) as lab:
        with connect(lab.target()) as session:
            hosts = read_state(session, lab.placement_names()).hosts
            read_host_drivers(hosts)
        inventory = str(lab.write_inventory(tmp_path / "inv.yaml", hosts=lab.host_names()))
        code, out, err = run_cli(["preflight", "-i", inventory, "--json",
                                  "--results-dir", str(tmp_path / "pf")])
    h0 = hosts["DC0_C0_H0"]
    assert h0.host_driver is not None
    assert (h0.host_driver.name, h0.host_driver.version, h0.host_driver.vendor) == (
        VIB_NAME, VIB_VERSION, "NVD")
    assert h0.host_driver.branch == 535 and h0.host_driver_note is None
    assert h0.graphics_per_gpu == {pci: "sharedDirect" for pci in h0.graphics_per_gpu}
    assert len(h0.graphics_per_gpu) == 4
    assert set(h0.passthrough_per_gpu.values()) == {"capable, off"}
    assert hosts["DC0_C0_H1"].host_driver is None
    assert hosts["DC0_C0_H1"].host_driver_note == "not read: the host is disconnected"
    assert hosts["DC0_C0_H2"].host_driver is None
    assert hosts["DC0_C0_H2"].host_driver_note == \
        "no NVIDIA driver VIB among the host's 1 software packages"

    assert code == 1
    assert "DC0_C0_H2: host driver: no NVIDIA driver VIB among the host's 1 software " \
           "packages: install the NVIDIA AI Enterprise host driver VIB" in err
    report = json.loads(out)
    first = report["hosts"][0]
    assert (first["host_driver"], first["host_driver_version"]) == (VIB_NAME, VIB_VERSION)
    gpu = first["gpus"][0]
    assert (gpu["graphics_type"], gpu["passthrough"], gpu["mig_capable"]) == (
        "sharedDirect", "capable, off", True)
    assert report["hosts"][2]["gpus"][0]["mig_capable"] is False  # no types offered
    assert any("from the MIG-backed vGPU types the host offers" in n for n in report["notes"])


def test_guest_driver_on_another_branch_fails_preflight_with_the_fix(
    vcsim_lab: VcsimLab, tmp_path: Path,
) -> None:
    inventory = str(vcsim_lab.write_inventory(tmp_path / "inv.yaml", extra={"drivers": {
        "guest_driver": "files/NVIDIA-Linux-x86_64-550.54.15-grid.run",
        "host_driver_version": "535.154.05"}}))
    code, out, err = run_cli(["preflight", "-i", inventory, "--scenario", "8",
                              "--results-dir", str(tmp_path / "pf")])
    assert code == 1
    assert f"DC0_C0_H0: driver branch: host VIB {VIB_VERSION} is branch 535, the " \
           "inventory's guest driver 550.54.15 is branch 550: guest branch 550 is newer " \
           "than the vGPU Manager's branch 535: never supported; install a guest driver of " \
           "branch 535/525/470 (drivers.guest_driver), or the branch-550 host driver VIB " \
           "on this host" in " ".join(err.split())
    assert f"DC0_C0_H0: host driver VIB {VIB_VERSION} is not the inventory's " \
           "drivers.host_driver_version 535.154.05" in " ".join(out.split())

    matching = str(vcsim_lab.write_inventory(tmp_path / "ok.yaml", extra={"drivers": {
        "guest_driver_version": "535.161.08", "host_driver_version": "535.161.05"}}))
    code, out, err = run_cli(["preflight", "-i", matching, "--scenario", "8",
                              "--results-dir", str(tmp_path / "pf")])
    assert code == 0, err
    assert "host and guest drivers on branch 535" in out
    assert "drivers.host_driver_version" not in out


def _preflight(inventory: str, results: Path, *extra: str) -> tuple[int, str, str]:
    return run_cli(["preflight", "-i", inventory, "--results-dir", str(results), *extra])


def test_upgraded_lab_drift_breaks_the_scenario_using_a_removed_type_only(
    tmp_path: Path,
) -> None:
    inventory_path = tmp_path / "inv.yaml"
    inventory, results = str(inventory_path), tmp_path / "pf"
    with VcsimLab(LabShape(hosts=2)) as lab:
        lab.write_inventory(inventory_path)
        code, _, err = _preflight(inventory, results, "--scenario", "8")
        assert code == 0, err
    [normal] = list(results.glob("preflight-*.json"))
    normal_id = normal.stem
    assert json.loads(normal.read_text())["id"] == normal_id

    upgraded = LabShape(hosts=2, esxi_build=NEW_BUILD, vib_version=NEW_VIB,
                        removed_vgpu_types=(REMOVED,))
    with VcsimLab(upgraded) as lab:
        lab.write_inventory(inventory_path)
        code, out, err = _preflight(inventory, results, "--scenario", "8", "--against", "last")
        assert code == 1
        assert f"drift since {normal_id}: DC0_C0_H0: vGPU type removed: {REMOVED} -> - " \
               "(the scenario uses it)" in err
        [new] = [p for p in results.glob("preflight-*.json") if p != normal]
        new_id = new.stem
        assert f"(run id {new_id})" in " ".join(out.split())
        drift = json.loads((results / f"drift-{new_id}.json").read_text())
        assert drift["before"] == normal_id and drift["breaking"] is True
        rows = {(r["host"], r["field"]): r for r in drift["rows"]}
        build = rows[("DC0_C0_H0", "ESXi build")]
        assert (build["before"], build["after"], build["breaking"]) == (
            "22380479", NEW_BUILD, False)
        driver = rows[("DC0_C0_H1", "host driver")]
        assert (driver["before"], driver["after"], driver["breaking"]) == (
            f"{VIB_NAME} {VIB_VERSION}", f"{VIB_NAME} {NEW_VIB}", False)
        assert rows[("DC0_C0_H1", "vGPU type removed")]["breaking"] is True
        assert rows[("scenario", "check vGPU types")]["breaking"] is True
        saved = json.loads((results / f"{new_id}.json").read_text())
        assert saved["drift"]["rows"] == drift["rows"]

        code, out, err = _preflight(inventory, results, "--scenario", "1",
                                    "--against", normal_id)
    assert code == 0, err
    text = " ".join(out.split())
    assert f"drift since {normal_id}" in text and "none breaking" in text
    assert REMOVED in out and NEW_BUILD in out and "informational" in out


def test_broken_or_unknown_against_exits_2_naming_the_file(
    vcsim_lab: VcsimLab, tmp_path: Path,
) -> None:
    inventory = str(vcsim_lab.write_inventory(tmp_path / "inv.yaml"))
    results = tmp_path / "pf"
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    tasks = vcsim_lab.recent_tasks()
    code, _, err = _preflight(inventory, results, "--against", str(broken))
    assert code == 2
    assert f"{broken} --against: cannot read it as preflight facts" in " ".join(err.split())
    no_hosts = tmp_path / "other.json"
    no_hosts.write_text(json.dumps({"vgpu": "something else"}))
    code, _, err = _preflight(inventory, results, "--against", str(no_hosts))
    assert code == 2 and f"{no_hosts} hosts: not preflight facts" in " ".join(err.split())
    code, _, err = _preflight(inventory, results, "--against", "preflight-nope")
    assert code == 2 and "'preflight-nope' is neither a file nor a run id" in err
    code, _, err = _preflight(inventory, results, "--against", "last")
    assert code == 2 and "run `vgpu preflight` once without --against first" in err
    assert vcsim_lab.recent_tasks() == tasks
    assert not results.exists() or not list(results.iterdir())


def _report(vib: str, gpus: int, checks: list[Check]) -> PreflightReport:
    usage = [GpuUsage(i, f"0000:{0x17 + 0x20 * i:02x}:00.0", "A100-80GB", "free", [], 8, 7,
                      graphics_type="sharedDirect") for i in range(gpus)]
    host = HostReport("esx-1", "8.0.2", "22380479", "connected", False, "sharedDirect",
                      usage, ["grid_a100d-3-40c"], ["grid_a100d-3-40c"], checks,
                      host_driver=VIB_NAME, host_driver_version=vib)
    return PreflightReport("vc", "VMware vCenter", "inv.yaml", None, "2026-01-01T00:00:00Z",
                           [host])


def test_compute_drift_flags_a_gone_gpu_and_a_branch_mismatch_as_breaking() -> None:
    before = _report(VIB_VERSION, 2, [Check("driver branch", True, "branch 535")]).to_json()
    before["id"] = "preflight-20260101T000000Z"
    after = _report("550.90.05-1OEM", 1, [Check("driver branch", False, "branch 550 vs 535")])
    drift = compute_drift(before, after, {"A100D-3-40C"})
    rows = {r.field: r for r in drift.rows}
    assert drift.breaking and drift.before_id == "preflight-20260101T000000Z"
    assert rows["GPU 0000:37:00.0"].after == "gone" and rows["GPU 0000:37:00.0"].breaking
    assert rows["check driver branch"].breaking
    assert rows["check driver branch"].after == "FAIL: branch 550 vs 535"
    assert not rows["host driver"].breaking
    assert compute_drift(before, _report(VIB_VERSION, 2, [Check("driver branch", True,
                                                                "branch 535")]), set()).rows == []
    assert json.loads(json.dumps(drift.to_json()))["breaking"] is True


def test_an_advanced_option_or_the_assignment_policy_changed_on_one_host_shows_as_drift(
    tmp_path: Path,
) -> None:
    inventory_path = tmp_path / "inv.yaml"
    inventory, results = str(inventory_path), tmp_path / "pf"
    with VcsimLab(LabShape(hosts=2, gpus_per_host=1)) as lab:
        lab.write_inventory(inventory_path)
        code, _, err = _preflight(inventory, results)
        assert code == 0, err
        [saved] = list(results.glob("preflight-*.json"))
        host = json.loads(saved.read_text())["hosts"][1]
        assert host["advanced_options"] == {"Power.CpuPolicy": "Balanced",
                                            "VMkernel.Boot.disableACSCheck": "False",
                                            "VMkernel.Boot.iovDisableIR": "False"}
        code, out, err = _preflight(inventory, results, "--against", "last")
        assert code == 0, err
        assert f"drift since {saved.stem}: no change" in out

        with connect(lab.target()) as session:
            facts = read_state(session, lab.placement_names()).hosts["DC0_C0_H1"]
            facts.option_manager.UpdateOptions(changedValue=[vim.option.OptionValue(
                key="Power.CpuPolicy", value="High Performance")])
            config = facts.graphics_config
            facts.graphics_manager.UpdateGraphicsConfig(config=vim.host.GraphicsConfig(
                hostDefaultGraphicsType=config.hostDefaultGraphicsType,
                sharedPassthruAssignmentPolicy="consolidation",
                deviceType=list(config.deviceType)))
        code, out, err = _preflight(inventory, results, "--against", saved.stem)
    assert code == 0, err
    drift = max(results.glob("drift-*.json"), key=lambda p: p.stat().st_mtime_ns)
    rows = [(r["host"], r["field"], r["before"], r["after"], r["breaking"])
            for r in json.loads(drift.read_text())["rows"]]
    assert rows == [
        ("DC0_C0_H1", "GPU assignment policy", "performance", "consolidation", False),
        ("DC0_C0_H1", "advanced option Power.CpuPolicy", "Balanced", "High Performance",
         False)]
    assert "advanced option Power.CpuPolicy" in out


def test_compute_drift_compares_the_advanced_options_both_runs_read() -> None:
    before = _report(VIB_VERSION, 1, [])
    before.hosts[0].advanced_options = {"Power.CpuPolicy": "Balanced", "PCI.Ats": "1"}
    after = _report(VIB_VERSION, 1, [])
    after.hosts[0].advanced_options = {"Power.CpuPolicy": "Balanced", "PCI.Ats": None,
                                       "Scenario.Only": "1"}
    rows = compute_drift(before.to_json(), after, set()).rows
    assert [(r.field, r.before, r.after, r.breaking) for r in rows] == [
        ("advanced option PCI.Ats", "1", "-", False)]
    after.hosts[0].advanced_options["PCI.Ats"] = "1"
    assert compute_drift(before.to_json(), after, set()).rows == []

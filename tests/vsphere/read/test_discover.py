"""`vgpu inventory discover` against the simulator lab: the inventory it writes loads, plans
scenario 8 exactly as the lab's own inventory does, and applies it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.cli.invoke import run_cli
from tests.labs.vcsim import VcsimLab, lab_available
from vgpu.model.load import load_inventory
from vgpu.sim.lab import gpu_pci_ids
from vgpu.vsphere.connect.connection import connect
from vgpu.vsphere.plan.reconcile import read_state

pytestmark = [pytest.mark.vcsim,
              pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))]

REPO = Path(__file__).resolve().parents[3]
SCENARIO_8 = str(REPO / "scenarios" / "mig_7x1g.yaml")
PASSWORD_ENV = "LAB_VC_PASSWORD"


def discover(lab: VcsimLab, monkeypatch: pytest.MonkeyPatch, *extra: str) -> tuple[int, str,
                                                                                   str]:
    monkeypatch.setenv(PASSWORD_ENV, lab.running.password)
    return run_cli(["inventory", "discover", "--vcenter", f"{lab.running.host}:"
                    f"{lab.running.port}", "--user", lab.shape.username, "--password-env",
                    PASSWORD_ENV, "--ca-file", str(lab.ca_file), *extra])


def plan_of(scenario: str, inventory: Path) -> dict[str, object]:
    code, out, err = run_cli(["plan", scenario, "-i", str(inventory), "--json"])
    assert code == 0, err
    plan = json.loads(out)
    return {"vms": plan["vms"], "gpus": plan["gpus"], "hosts": plan["hosts"]}


def test_discovered_inventory_plans_and_applies_scenario_8_like_the_lab_inventory(
    vcsim_lab: VcsimLab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    code, text, err = discover(vcsim_lab, monkeypatch)
    assert code == 0, err
    assert vcsim_lab.running.password not in text
    assert "TODO" in text and "ip_pool: null" in text
    found = yaml.safe_load(text)
    assert found["vcenter"]["password"] == {"env": PASSWORD_ENV}
    assert found["vcenter"]["ca_bundle"] == str(Path(str(vcsim_lab.ca_file)).resolve())
    assert found["placement"] == {"datacenter": "DC0", "cluster": "DC0_C0",
                                  "datastore": "LocalDS_0", "network": "VM Network",
                                  "template": "vgpu-template"}
    assert found["hosts"] == [
        {"name": name, "gpus": [{"model": "A100-80GB", "count": 4, "pci_ids": gpu_pci_ids(4)}]}
        for name in vcsim_lab.host_names()]
    assert "grid_a100d-1-10c" in text  # the vGPU types each host offers, as comments

    # The TODO a test must fill: the IP pool (the lab inventory's).
    found["network"]["ip_pool"] = vcsim_lab.inventory_data()["network"]["ip_pool"]  # type: ignore[index]
    discovered = tmp_path / "discovered.yaml"
    discovered.write_text(yaml.safe_dump(found, sort_keys=False))
    assert load_inventory(discovered).hosts[0].gpus[0].count == 4
    reference = vcsim_lab.write_inventory(tmp_path / "lab.yaml")
    assert plan_of(SCENARIO_8, discovered) == plan_of(SCENARIO_8, reference)

    code, out, err = run_cli(["apply", "--no-provision", SCENARIO_8, "-i", str(discovered),
                              "--yes"])
    assert code == 0, err
    assert "7 to create" in out
    with connect(vcsim_lab.target()) as session:
        vms = read_state(session, vcsim_lab.placement_names()).vms
    assert {f"s8-1g-{n}" for n in range(1, 8)} <= set(vms)
    assert vms["s8-1g-1"].vgpus == ("grid_a100d-1-10c",)


def test_discover_refuses_bad_input_before_reaching_vcenter(
    vcsim_lab: VcsimLab, monkeypatch: pytest.MonkeyPatch,
) -> None:
    code, out, err = discover(vcsim_lab, monkeypatch, "--cluster", "nope")
    assert code == 2 and out == ""
    assert "command line --cluster: no cluster named 'nope' (fix: use one of: DC0_C0)" in err

    code, _, err = discover(vcsim_lab, monkeypatch, "--insecure")
    assert code == 2 and "--ca-file / --insecure: both were given" in err

    monkeypatch.delenv(PASSWORD_ENV)
    code, _, err = run_cli(["inventory", "discover", "--vcenter", "127.0.0.1:1",
                            "--password-env", PASSWORD_ENV])
    assert code == 2 and f"environment {PASSWORD_ENV}: is not set" in err

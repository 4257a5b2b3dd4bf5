"""An HGX A100 80GB host (SXM4 modules, PCI device 0x20b2) offers grid_a100dx-* types, not
the PCIe card's grid_a100d-*: discovery, plan, preflight and apply name the HGX board."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

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
PASSWORD_ENV = "LAB_VC_PASSWORD"


@pytest.fixture(scope="module")
def hgx_lab() -> object:
    with VcsimLab(LabShape(hosts=1, gpus_per_host=4, gpu_form_factor="sxm")) as lab:
        yield lab


def test_discovery_writes_the_sxm_form_factor(hgx_lab: VcsimLab,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PASSWORD_ENV, hgx_lab.running.password)
    code, text, err = run_cli(["inventory", "discover", "--vcenter", f"{hgx_lab.running.host}:"
                               f"{hgx_lab.running.port}", "--user", hgx_lab.shape.username,
                               "--password-env", PASSWORD_ENV, "--ca-file",
                               str(hgx_lab.ca_file)])
    assert code == 0, err
    [entry] = yaml.safe_load(text)["hosts"][0]["gpus"]
    assert (entry["model"], entry["count"], entry["form_factor"]) == ("A100-80GB", 4, "sxm")
    assert "vGPU board A100DX" in text


def test_plan_and_apply_use_the_hgx_types(hgx_lab: VcsimLab, tmp_path: Path) -> None:
    inventory = str(hgx_lab.write_inventory(tmp_path / "hgx.yaml"))
    code, out, err = run_cli(["plan", SCENARIO_8, "-i", inventory, "--json"])
    assert code == 0, err
    plan = json.loads(out)
    assert {v["vgpu_type"] for vm in plan["vms"] for v in vm["vgpus"]} == {"A100DX-1-10C"}
    assert plan["gpus"][0]["board"] == "A100DX"
    code, out, err = run_cli(["plan", SCENARIO_8, "-i", inventory])
    assert code == 0, err
    assert "A100-80GB board A100DX (mig)" in out

    code, out, err = run_cli(["apply", "--no-provision", SCENARIO_8, "-i", inventory, "--yes"])
    assert code == 0, err
    assert "7 of 7 VM(s) done" in out
    with connect(hgx_lab.target()) as session:
        vms = read_state(session, hgx_lab.placement_names()).vms
    assert {vms[f"s8-1g-{n}"].vgpus for n in range(1, 8)} == {("grid_a100dx-1-10c",)}


def test_an_inventory_that_says_pcie_still_applies_by_pci_device_id_and_preflight_says_so(
    hgx_lab: VcsimLab, tmp_path: Path,
) -> None:
    data = hgx_lab.inventory_data(ip_pool=("127.0.0.51", "127.0.0.60"))  # beside scenario 8
    for host in data["hosts"]:  # type: ignore[attr-defined]
        for entry in host["gpus"]:
            entry.pop("form_factor")
    inventory = tmp_path / "says-pcie.yaml"
    inventory.write_text(yaml.safe_dump(data, sort_keys=False))

    code, out, err = run_cli(["preflight", "-i", str(inventory), "--scenario", "1", "--json",
                              "--results-dir", str(tmp_path / "preflight")])
    assert code == 0, err
    facts = json.loads(out)
    assert {g["board"] for g in facts["hosts"][0]["gpus"]} == {"A100DX"}
    # The simulator reports no vgpuMode (before ESXi 8.0 U3): MIG mode is inferred from the
    # MIG-backed types offered for the GPU's board, A100DX here.
    assert {(g["vgpu_mode"], g["mig_capable"]) for g in facts["hosts"][0]["gpus"]} == {
        (None, True)}
    assert any(n.startswith("MIG capability per GPU is read from") for n in facts["notes"])
    assert any("PCI device 0x20b2, form factor sxm (vGPU board A100DX), but the inventory "
               "says form_factor pcie: set form_factor: sxm" in n for n in facts["notes"])

    code, out, err = run_cli(["apply", "--no-provision", SCENARIO_1, "-i", str(inventory),
                              "--yes"])
    assert code == 0, err
    with connect(hgx_lab.target()) as session:
        vms = read_state(session, hgx_lab.placement_names()).vms
    assert [vm.vgpus for vm in vms.values() if vm.scenario == "1"] == [("grid_a100dx-7-80c",)]

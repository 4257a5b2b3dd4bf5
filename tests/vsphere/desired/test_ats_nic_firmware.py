"""ATS as NVIDIA AI Enterprise documents it, on the simulator lab: the NICs' firmware step
(mlxconfig, a host reboot, ACS on the bridges) comes from the scenario and the inventory,
`vgpu plan` and `vgpu preflight` say what to run on which host, and preflight passes once
the inventory records it done."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.cli.invoke import run_cli
from tests.labs.vcsim import VcsimLab, lab_available
from vgpu.errors import InputError
from vgpu.model.load import load_scenario
from vgpu.sim.lab import RDMA_NIC_PORTS, LabShape

pytestmark = [pytest.mark.vcsim,
              pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))]

REPO = Path(__file__).resolve().parents[3]
NIC = RDMA_NIC_PORTS["sriov"]
FIRMWARE = {"command": "mlxconfig -d {device} set ATS_ENABLED=true",
            "bridge_command": "lab-acs --bridge {bridge} --on"}


def scenario_file(tmp_path: Path, firmware: dict[str, object]) -> Path:
    data = yaml.safe_load((REPO / "scenarios" / "train_multinode_2.yaml").read_text())
    data["vm_settings"]["ats"] = [{"name": "ats-nic", "nic_firmware": firmware}]
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def inventory_file(lab: VcsimLab, tmp_path: Path, **nic: str) -> Path:
    data = lab.inventory_data(rdma_nic_kind="sriov")
    for host in data["hosts"]:  # type: ignore[attr-defined]
        host["rdma_nics"][0].update(nic)
    path = tmp_path / "inv.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def firmware_checks(lab: VcsimLab, tmp_path: Path, scenario: Path,
                    inventory: Path) -> tuple[int, dict[str, dict]]:
    code, out, err = run_cli(["preflight", str(scenario), "-i", str(inventory),
                              "--results-dir", str(tmp_path / "pf"), "--json"])
    assert out, err
    report = json.loads(out)
    return code, {h["name"]: c for h in report["hosts"] for c in h["checks"]
                  if c["name"] == f"ATS NIC firmware {NIC}"}


def test_preflight_says_what_to_run_per_host_until_the_inventory_records_it(
    tmp_path: Path,
) -> None:
    with VcsimLab(LabShape(hosts=2, passthrough_hosts=(0, 1))) as lab:
        scenario = scenario_file(tmp_path, FIRMWARE)

        code, checks = firmware_checks(lab, tmp_path, scenario, inventory_file(lab, tmp_path))
        assert code == 1 and set(checks) == {"DC0_C0_H0", "DC0_C0_H1"}
        assert not checks["DC0_C0_H0"]["ok"]
        assert "the inventory names no mlx_device for NIC 0000:3b:00.1 of DC0_C0_H0" in \
            checks["DC0_C0_H0"]["detail"]

        inventory = inventory_file(lab, tmp_path, mlx_device="mt4123_pciconf0")
        code, checks = firmware_checks(lab, tmp_path, scenario, inventory)
        assert code == 1
        # The bridges are read from the host: above the NIC and above the VM's GPU.
        assert checks["DC0_C0_H0"] == {
            "name": f"ATS NIC firmware {NIC}", "ok": False,
            "detail": f"ATS setting ats-nic, NIC {NIC} on DC0_C0_H0: run on DC0_C0_H0 "
                      "`mlxconfig -d mt4123_pciconf0 set ATS_ENABLED=true`; reboot the host; "
                      "set ACS: `lab-acs --bridge 0000:16:00.0 --on`, `lab-acs --bridge "
                      "0000:3a:00.0 --on`; then record `ats_firmware: enabled` on the NIC in "
                      "the inventory's rdma_nics"}

        done = inventory_file(lab, tmp_path, mlx_device="mt4123_pciconf0",
                              ats_firmware="enabled")
        code, checks = firmware_checks(lab, tmp_path, scenario, done)
        assert code == 0
        assert checks["DC0_C0_H1"]["ok"]
        assert checks["DC0_C0_H1"]["detail"].endswith(
            "recorded done in the inventory (`mlxconfig -d mt4123_pciconf0 set "
            "ATS_ENABLED=true`); vgpu cannot read NIC firmware through vSphere")


def test_plan_names_the_host_step(vcsim_lab: VcsimLab, tmp_path: Path) -> None:
    scenario = scenario_file(tmp_path, FIRMWARE)
    inventory = inventory_file(vcsim_lab, tmp_path, mlx_device="mt4123_pciconf0")
    code, out, err = run_cli(["plan", str(scenario), "-i", str(inventory)])
    assert code == 0, err
    text = " ".join(out.split())
    assert "host step: ATS setting ats-nic, NIC 0000:3b:00.1 on DC0_C0_H1: run on DC0_C0_H1 " \
           "`mlxconfig -d mt4123_pciconf0 set ATS_ENABLED=true`; reboot the host; set ACS " \
           "on the PCIe bridges above the NIC and the VM's GPUs (preflight names them) with " \
           "`lab-acs --bridge {bridge} --on`" in text


def test_a_firmware_command_with_an_unknown_placeholder_is_refused(tmp_path: Path) -> None:
    scenario = scenario_file(tmp_path, {"command": "mlxconfig -d {dev} set ATS_ENABLED=true"})
    with pytest.raises(InputError) as caught:
        load_scenario(scenario)
    text = str(caught.value)
    assert "vm_settings.ats[0].nic_firmware.command" in text and "unknown: dev" in text

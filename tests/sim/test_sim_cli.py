"""`vgpu sim up / status / down`: a lab in the background for a person, with an inventory
that works as written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.cli.invoke import run_cli
from tests.labs.vcsim import lab_available
from vgpu.catalog import LOCAL_INVENTORY
from vgpu.cli.sim import UPGRADED_BUILD, UPGRADED_VIB
from vgpu.sim import state as simstate
from vgpu.sim.build import binary_path, build
from vgpu.sim.lab import ESXI_BUILD, VIB_NAME, VIB_VERSION, pid_alive

pytestmark = [pytest.mark.vcsim,
              pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))]


def test_sim_up_writes_a_working_inventory_and_sim_down_stops_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VGPU_SIM_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(["sim", "up", "--port", "0", "--hosts", "2"])
    record = simstate.status()
    try:
        assert code == 0, err
        assert record is not None and pid_alive(record.pid)
        assert f"running at {record.url}" in out
        inventory = tmp_path / LOCAL_INVENTORY
        assert inventory.exists()
        written = yaml.safe_load(inventory.read_text())
        password_file = Path(written["vcenter"]["password"]["file"])
        assert password_file.read_text().strip() not in inventory.read_text()
        assert written["vcenter"]["ca_bundle"]

        code, out, err = run_cli(["sim", "up", "--port", "0"])
        assert code == 2 and "already running" in err

        code, out, err = run_cli(["preflight", "-i", str(inventory), "--scenario", "8",
                                  "--json", "--results-dir", str(tmp_path / "pf")])
        assert code == 0, err
        facts = json.loads(out)
        assert [h["name"] for h in facts["hosts"]] == ["DC0_C0_H0", "DC0_C0_H1"]
    finally:
        code, out, _ = run_cli(["sim", "down"])
    assert code == 0 and "stopped the simulator lab" in out
    assert not pid_alive(record.pid)
    assert not (tmp_path / LOCAL_INVENTORY).exists()
    assert simstate.status() is None
    code, out, _ = run_cli(["sim", "status"])
    assert code == 1 and "no simulator lab is running" in out


def test_sim_up_upgraded_lab_reports_its_build_vib_removed_type_and_maintenance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VGPU_SIM_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(["sim", "up", "--port", "0", "--hosts", "2", "--maintenance", "2"])
    assert code == 2 and "--maintenance: host index 2 is not below --hosts 2" in err
    assert simstate.status() is None

    code, out, err = run_cli([
        "sim", "up", "--port", "0", "--hosts", "2", "--esxi-build", "24022510",
        "--vib-version", "550.90.05-1OEM.800.1.0.20613240",
        "--remove-vgpu-type", "grid_a100d-1-10c", "--remove-vgpu-type", "grid_a100d-2-20c",
        "--maintenance", "1"])
    record = simstate.status()
    try:
        assert code == 0, err
        assert record is not None
        assert "vGPU types removed: grid_a100d-1-10c, grid_a100d-2-20c" in out
        assert "in maintenance mode: DC0_C0_H1" in out
        assert record.shape["esxi_build"] == "24022510"
        assert record.shape["vib"] == "NVD-AIE_ESXi_8.0.0_Driver 550.90.05-1OEM.800.1.0.20613240"
        assert record.shape["maintenance"] == ["DC0_C0_H1"]
        written = yaml.safe_load((tmp_path / LOCAL_INVENTORY).read_text())
        assert "build 24022510" in written["description"]
        assert "vGPU types removed: grid_a100d-1-10c, grid_a100d-2-20c" in written["description"]

        code, out, err = run_cli(["preflight", "-i", LOCAL_INVENTORY, "--json",
                                  "--results-dir", str(tmp_path / "pf")])
        h0, h1 = json.loads(out)["hosts"]
        assert (h0["build"], h0["host_driver_version"]) == (
            "24022510", "550.90.05-1OEM.800.1.0.20613240")
        assert "grid_a100d-1-10c" not in h0["vgpu_types"]
        assert "grid_a100d-2-20c" not in h0["vgpu_types"]
        assert "grid_a100d-7-80c" in h0["vgpu_types"] and len(h0["vgpu_types"]) == 13
        assert (h0["in_maintenance"], h1["in_maintenance"]) == (False, True)
        assert code == 1 and "DC0_C0_H1: maintenance mode: in maintenance mode" in err
    finally:
        run_cli(["sim", "down"])


def test_sim_status_tells_the_host_upgraded_in_place_from_the_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VGPU_SIM_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(["sim", "up", "--port", "0", "--hosts", "2", "--maintenance", "1"])
    assert code == 0, err
    old = f"ESXi 8.0.2 build {ESXI_BUILD}  host driver VIB {VIB_NAME} {VIB_VERSION}"
    try:
        code, out, err = run_cli(["sim", "status"])
        assert code == 0, err
        assert "hosts: 2" in out
        assert f"DC0_C0_H0  {old}  no reboot pending\n" in out
        assert f"DC0_C0_H1  {old}  no reboot pending  in maintenance mode" in out

        code, _, err = run_cli(["sim", "upgrade", "--host", "DC0_C0_H0"])
        text = " ".join(err.split())
        assert code == 2
        assert "command line --host: host DC0_C0_H0 is not in maintenance mode" in text
        assert "run `vgpu drain --host DC0_C0_H0` first" in text

        code, _, err = run_cli(["sim", "upgrade", "--host", "DC0_C0_H1", "--no-reboot"])
        assert code == 0, err
        code, out, _ = run_cli(["sim", "status"])
        assert f"DC0_C0_H1  ESXi 8.0.2 build {ESXI_BUILD}  host driver VIB {VIB_NAME} " \
            f"{UPGRADED_VIB}  reboot pending  in maintenance mode" in out
        assert f"DC0_C0_H0  {old}  no reboot pending\n" in out

        code, _, err = run_cli(["sim", "upgrade", "--host", "DC0_C0_H1"])
        assert code == 0, err
        code, out, _ = run_cli(["sim", "status"])
        assert f"DC0_C0_H1  ESXi 8.0.2 build {UPGRADED_BUILD}  host driver VIB {VIB_NAME} " \
            f"{UPGRADED_VIB}  no reboot pending  in maintenance mode" in out
        assert f"DC0_C0_H0  {old}  no reboot pending\n" in out
    finally:
        run_cli(["sim", "down"])


def test_the_binary_is_built_once_and_reused() -> None:
    first = build()
    assert first == binary_path() and first.exists()
    mtime = first.stat().st_mtime_ns
    assert build() == first and first.stat().st_mtime_ns == mtime

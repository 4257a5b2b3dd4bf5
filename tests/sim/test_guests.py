"""`vgpu sim up` with guests: one sshd per VM that apply creates, at the VM's IP, whose
simulated nvidia-smi answers as the slice the plan gave that VM; destroy removes them;
`vgpu bench` on the lab's inventory runs where the scenario's hosts are, and says so;
`vgpu sim down` leaves nothing behind. Without root, `sim up` gives the vCenter part and
names what is missing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from tests.cli.invoke import run_cli
from tests.labs.sshlab import lab_available as ssh_lab_available
from tests.labs.vcsim import lab_available
from vgpu.catalog import LOCAL_INVENTORY
from vgpu.sim import guests
from vgpu.sim import state as simstate

pytestmark = [pytest.mark.vcsim, pytest.mark.sshd, pytest.mark.slow,
              pytest.mark.skipif(lab_available() is not None, reason=str(lab_available())),
              pytest.mark.skipif(ssh_lab_available() is not None,
                                 reason=str(ssh_lab_available()))]


@pytest.fixture
def lab_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VGPU_SIM_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("VGPU_INVENTORY", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def ssh(inventory: dict[str, object], address: str, command: str) -> str:
    login = inventory["ssh"]
    assert isinstance(login, dict)
    done = subprocess.run(
        ["ssh", "-i", login["key_file"], "-o", f"UserKnownHostsFile={login['known_hosts']}",
         "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
         f"{login['user']}@{address}", command],
        capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_guests_follow_the_vms_and_sim_down_leaves_nothing(lab_folder: Path) -> None:
    code, out, err = run_cli(["sim", "up", "--port", "0", "--hosts", "2"])
    try:
        assert code == 0, err
        assert "guests: one per VM that `vgpu apply` creates" in out
        inventory = yaml.safe_load((lab_folder / LOCAL_INVENTORY).read_text())
        assert inventory["ssh"]["user"] == guests.GUEST_USER
        driver = Path(inventory["drivers"]["guest_driver"])
        assert driver.name == "NVIDIA-Linux-x86_64-535.154.05-grid.run"
        assert "SIMULATOR" in driver.read_text()
        assert Path(inventory["drivers"]["licence_token"]).read_text().startswith(
            "vgpu-sim-simulated-licence-token.")

        code, _, err = run_cli(["bench", "--scenario", "6", "--runs", "0"])
        assert code == 2
        assert ("running on this machine: the simulator lab in ./vgpu-inventory.yaml has no "
                "VMs of scenario 6 (`vgpu apply --scenario 6 --yes` makes them)") in err
        code, _, err = run_cli(["bench", "--scenario", "bm6", "--runs", "0"])
        assert code == 2
        assert ("running on this machine: scenario bm6 is bare metal and "
                "./vgpu-inventory.yaml lists no bare-metal hosts") in err

        code, out, err = run_cli(["apply", "--scenario", "6", "--yes", "--no-provision"])
        assert code == 0, out + err
        record = simstate.status()
        assert record is not None and record.guest_network is not None
        started = {g.vm: g for g in guests.read_guests(record.guest_network)}
        assert sorted(started) == ["s6-1g", "s6-2g", "s6-4g"]
        assert started["s6-4g"].hardware == "GRID A100D-4-40C, MIG 4g.40gb"
        pool = inventory["network"]["ip_pool"]["start"].rsplit(".", 1)[0]
        assert started["s6-4g"].address == f"{pool}.11"
        code, out, _ = run_cli(["sim", "status"])
        assert code == 0 and "guests: 3" in out
        assert "s6-1g" in out and "GRID A100D-1-10C, MIG 1g.10gb (simulated)" in out

        code, _, err = run_cli(["bench", "--scenario", "6", "--runs", "0"])
        assert code == 2
        assert "running on the simulator lab's VMs: " in err
        assert {"s6-4g", "s6-2g", "s6-1g"} <= set(
            err.split("running on the simulator lab's VMs: ")[1].split(" (")[0].split(", "))

        code, out, err = run_cli(["provision", "--scenario", "6", "--host", "s6-1g",
                                  "--log-dir", str(lab_folder / "logs")])
        assert code == 0, out + err
        assert "1 hosts: " in out and "0 hosts failed" in out
        listed = ssh(inventory, started["s6-1g"].address, "nvidia-smi -L; nvidia-smi -q")
        assert "GPU 0: GRID A100D-1-10C" in listed and "MIG 1g.10gb" in listed
        assert "Simulator" in listed and "License Status" in listed
        assert "Licensed" in listed.split("License Status")[1].splitlines()[0]

        code, out, err = run_cli(["destroy", "--scenario", "6", "--yes"])
        assert code == 0, out + err
        assert "simulator guest s6-1g at" in out and "removed" in out
        assert guests.read_guests(record.guest_network) == []
        assert not [n for n in guests.leftovers() if n.startswith("namespace")]
    finally:
        code, out, err = run_cli(["sim", "down"])
    assert code == 0, out + err
    assert guests.leftovers() == []
    assert not (lab_folder / LOCAL_INVENTORY).exists()


def test_without_what_guests_need_sim_up_gives_the_vcenter_part_and_names_it(
    lab_folder: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A machine without the OpenSSH server (the same path as one without root): the
    first line says what guests need, the lab starts, the inventory has no guest sections,
    apply --no-provision works and says the VMs have no guests."""
    monkeypatch.setattr(guests, "SSHD", lab_folder / "no-sshd")
    code, out, err = run_cli(["sim", "up", "--port", "0", "--hosts", "2"])
    try:
        assert code == 0, err
        first = out.splitlines()[0]
        assert first.startswith(f"note: guests need {lab_folder / 'no-sshd'} (the OpenSSH "
                                "server: apt-get install openssh-server)")
        assert "starting the vCenter part only" in " ".join(out.split())
        assert "guests: none (missing: " in out
        written = yaml.safe_load((lab_folder / LOCAL_INVENTORY).read_text())
        assert "drivers" not in written and "ssh" not in written
        assert guests.leftovers() == []
        code, out, err = run_cli(["apply", "--scenario", "5", "--yes", "--no-provision"])
        assert code == 0, out + err
        assert "simulator lab without guests (missing: " in out
    finally:
        code, out, _ = run_cli(["sim", "down"])
    assert code == 0 and "stopped the simulator lab" in out

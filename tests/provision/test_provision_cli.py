"""``vgpu provision`` end to end as a user runs it: scenario 5 (one VM with a 1g.10gb
slice) from the catalogue, an inventory file, one loopback sshd host."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.labs.fixtures import ssh_lab
from tests.labs.sshlab import SshLab
from tests.provision.lab_jobs import (
    SUDO_ENV,
    SUDO_PASSWORD,
    TOKEN_TEXT,
    guest_files,
    serve_toolkit_key,
)

ROOT = Path(__file__).resolve().parents[2]
CATALOGUE_SCENARIO = ROOT / "scenarios" / "mig_1x1g.yaml"
pytestmark = [pytest.mark.sshd, pytest.mark.slow]


lab = ssh_lab(1, scope="module", prepare=serve_toolkit_key, sudo_password=SUDO_PASSWORD,
              trust_host_keys=False)


def write_inventory(lab: SshLab, directory: Path, **drivers: str) -> Path:
    host = lab.hosts[0]
    driver, token = guest_files(directory / "files")
    doc = yaml.safe_load((ROOT / "inventory" / "sim.yaml").read_text())
    doc["network"] = {"ip_pool": {"start": host.address, "end": host.address,
                                  "netmask": "255.0.0.0"}}
    doc["ssh"] = {"user": host.user, "port": host.port, "key_file": str(host.key_path),
                  "known_hosts": str(host.known_hosts_path),
                  "sudo_password": {"env": SUDO_ENV}, "connect_timeout_s": 3}
    doc["drivers"] = {"guest_driver": f"files/{driver.name}", "licence_token":
                      f"files/{token.name}", **drivers}
    path = directory / "inventory.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def host_runtime_scenario(directory: Path) -> Path:
    """Scenario 5 with the harness venv: the lab's guests have a simulated docker, not a
    daemon to build the harness image in."""
    doc = yaml.safe_load(CATALOGUE_SCENARIO.read_text())
    doc["guest"]["runtime"] = "host"
    path = directory / CATALOGUE_SCENARIO.name
    path.write_text(yaml.safe_dump(doc))
    return path


def vgpu(inventory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    state = inventory.parent
    env = {**os.environ, SUDO_ENV: SUDO_PASSWORD, "COLUMNS": "250"}
    return subprocess.run(
        [sys.executable, "-m", "vgpu", "provision", str(host_runtime_scenario(state)),
         "--inventory", str(inventory), "--log-dir", str(state / "logs"),
         "--state-dir", str(state / "st"),
         "--no-harness-deps", "--retries", "0", *args],
        capture_output=True, text=True, env=env, cwd=state, timeout=300, check=False,
    )


def test_cli_host_keys_dry_run_converge_and_rerun(lab: SshLab, tmp_path: Path) -> None:
    inventory = write_inventory(lab, tmp_path)
    host = lab.hosts[0]

    refused = vgpu(inventory)
    assert refused.returncode == 1
    assert "s5-1g" in refused.stderr and "is not in" in refused.stderr
    assert "--accept-new-host-keys" in refused.stderr
    assert host.known_hosts_path.read_text() == ""

    dry = vgpu(inventory, "--accept-new-host-keys", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "dry run: nothing changed" in dry.stdout and "would change" in dry.stdout
    assert host.known_hosts_path.read_text().splitlines() == [host.known_hosts_entry]
    assert host.installed_packages() == set()

    first = vgpu(inventory)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "1 hosts: 6 steps changed, 2 already fine, 0 hosts failed" in first.stdout
    second = vgpu(inventory)
    assert second.returncode == 0
    assert "1 hosts: 0 steps changed, 8 already fine, 0 hosts failed" in second.stdout
    logs = list((tmp_path / "logs").rglob("s5-1g.log"))
    assert len(logs) == 4
    for text in [p.read_text() for p in logs] + [first.stdout, first.stderr]:
        assert SUDO_PASSWORD not in text and TOKEN_TEXT not in text


def test_cli_bad_file_paths_exit_2_naming_host_step_and_fix(lab: SshLab,
                                                             tmp_path: Path) -> None:
    inventory = write_inventory(lab, tmp_path, licence_token="files/wrong.tok",
                                guest_driver="files/NVIDIA-Linux-x86_64-550.54-grid.run")
    result = vgpu(inventory, "--accept-new-host-keys")
    assert result.returncode == 2
    errors = result.stderr
    assert "drivers.guest_driver: host s5-1g, step nvidia-driver: driver file" in errors
    assert "drivers.licence_token: host s5-1g, step vgpu-licensing: token file" in errors
    assert errors.count("does not exist") == 2 and errors.count("(fix:") == 2
    assert not (tmp_path / "logs").exists()


def test_cli_unreachable_host_exit_1_with_fix(lab: SshLab, tmp_path: Path) -> None:
    inventory = write_inventory(lab, tmp_path)
    doc = yaml.safe_load(inventory.read_text())
    doc["network"]["ip_pool"] = {"start": "127.0.0.250", "end": "127.0.0.250",
                                 "netmask": "255.0.0.0"}
    inventory.write_text(yaml.safe_dump(doc))
    result = vgpu(inventory)
    assert result.returncode == 1
    assert "1 of 1 hosts failed" in result.stderr
    assert "s5-1g (127.0.0.250) step connect: cannot reach" in result.stderr
    assert "fix: check that the VM is powered on" in result.stderr
    assert "[log: " in result.stderr

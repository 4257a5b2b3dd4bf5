"""Scenario 8 of lab study A (seven VMs, one 1g.10gb MIG slice each) provisioned over real
SSH on seven loopback hosts: a dry run changes nothing, the first run changes every step,
the second changes none, every VM shows its 1g.10gb slice, and no secret leaks."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest
from rich.console import Console

from tests.labs.connect import FAST
from tests.labs.fixtures import ssh_lab
from tests.labs.sshlab import SshLab
from tests.provision.lab_jobs import (
    SUDO_ENV,
    SUDO_PASSWORD,
    TOKEN_TEXT,
    guest_files,
    serve_toolkit_key,
)
from vgpu.model.inventory import Drivers
from vgpu.model.load import load_inventory, load_scenario
from vgpu.planner import build_plan
from vgpu.provision.adapter import HarnessOptions, jobs_from_plan
from vgpu.provision.display import summary
from vgpu.provision.fanout import Job, provision_all
from vgpu.provision.report import RunReport
from vgpu.provision.step import Outcome
from vgpu.remote.redact import Redactor
from vgpu.remote.transport import SudoSettings

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.sshd, pytest.mark.slow]
MUTATING = ["base-packages", "container-runtime:docker", "nvidia-driver",
            "nvidia-container-toolkit", "vgpu-licensing", "node-harness"]


lab = ssh_lab(7, scope="module", prepare=serve_toolkit_key, sudo_password=SUDO_PASSWORD)


def scenario8_jobs(lab: SshLab, files: Path) -> list[Job]:
    """The plan for scenario 8 on the simulator inventory, whose IP pool starts at
    127.0.0.11 like the lab; each VM then gets its lab host's port, user and key."""
    driver, token = guest_files(files)
    scenario = load_scenario(ROOT / "scenarios" / "mig_7x1g.yaml")
    # The harness venv: the lab's guests have a simulated docker, not a daemon to build in.
    scenario = scenario.model_copy(update={"guest": scenario.guest.model_copy(
        update={"runtime": "host"})})
    inventory = load_inventory(ROOT / "inventory" / "sim.yaml")
    inventory = inventory.model_copy(update={"drivers": Drivers(
        guest_driver=str(driver), licence_token=str(token))})
    plan = build_plan(scenario, inventory)
    jobs = jobs_from_plan(plan, scenario, inventory, inventory_dir=files,
                          harness=HarnessOptions(install_requirements=False))
    by_address = {h.address: h for h in lab.hosts}
    lab_jobs = []
    for job in jobs:
        host = by_address[job.target.address]
        lab_target = dataclasses.replace(
            job.target, port=host.port, user=host.user, key_file=host.key_path,
            known_hosts=host.known_hosts_path, sudo=SudoSettings(password_env=SUDO_ENV))
        lab_jobs.append(Job(lab_target, dataclasses.replace(job.requirements,
                                                            licence_timeout_s=5)))
    return lab_jobs


def run(jobs: list[Job], tmp: Path, name: str, dry_run: bool = False) -> tuple[RunReport, str]:
    redactor = Redactor()
    report = provision_all(jobs, options=FAST, log_dir=tmp / "logs" / name,
                           state_dir=tmp / "state", scenario="8", dry_run=dry_run,
                           concurrency=7, redactor=redactor)
    out = io.StringIO()
    Console(file=out, width=250).print(summary(report, redactor))
    return report, out.getvalue()


def test_scenario8_converges_idempotently_and_keeps_secrets(
        lab: SshLab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SUDO_ENV, SUDO_PASSWORD)
    jobs = scenario8_jobs(lab, tmp_path / "files")
    assert [j.target.name for j in jobs] == [f"s8-1g-{n}" for n in range(1, 8)]
    assert {j.requirements.expected_mig_profiles for j in jobs} == {("1g.10gb",)}

    dry, dry_text = run(jobs, tmp_path, "dry", dry_run=True)
    assert dry.exit_code == 0
    for host in dry.hosts:
        assert [host.step(s).outcome for s in MUTATING] == [Outcome.WOULD_CHANGE] * 6
    for host in lab.hosts:  # the dry run changed nothing on any host
        assert host.installed_packages() == set()
        assert list(host.system_root.iterdir()) == []
        assert not (host.home / ".vgpu").exists()
        assert not (host.sim_state / "driver_version").exists()
    assert "would change" in dry_text

    first, first_text = run(jobs, tmp_path, "first")
    assert first.exit_code == 0, first.failure_lines()
    for host in first.hosts:
        assert [host.step(s).outcome for s in MUTATING] == [Outcome.CHANGED] * 6, host
        verify = host.step("verify-gpu")
        assert verify.outcome is Outcome.OK
        assert verify.detail == "GRID A100D-1-10C; MIG 1g.10gb"
        assert "Licensed" in host.step("vgpu-licensing").detail
    for host in lab.hosts:
        assert {"build-essential", "cmake", "curl", "docker.io",
                "nvidia-container-toolkit"} <= host.installed_packages()
        token = host.system_root / "etc/nvidia/ClientConfigToken"
        assert (token / "client_configuration_token_vgpu.tok").read_text().strip() == TOKEN_TEXT
        assert "\nFeatureType=1\n" in (host.system_root / "etc/nvidia/gridd.conf").read_text()

    for log in (tmp_path / "logs" / "first").glob("*.log"):
        # The apt index is refreshed once, and again only after the toolkit source is added.
        assert log.read_text().count("apt-get update -q") == 2

    second, second_text = run(jobs, tmp_path, "second")
    assert second.exit_code == 0
    for host in second.hosts:
        assert host.count(Outcome.CHANGED) == 0
        assert host.count(Outcome.OK) == len(host.steps) == 8
    assert "0 steps changed, 56 already fine, 0 hosts failed" in second_text

    logs = [p for p in (tmp_path / "logs").rglob("*.log")]
    assert len(logs) == 21
    everything = "\n".join([p.read_text() for p in logs] + [dry_text, first_text, second_text,
                                                            repr(dry), repr(first),
                                                            repr(second)])
    assert "sudo " in everything and "client_configuration_token" in everything
    for secret in (SUDO_PASSWORD, TOKEN_TEXT):
        assert secret not in everything

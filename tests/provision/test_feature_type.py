"""gridd FeatureType by scenario kind: a VM with a vGPU licenses as NVIDIA vGPU (1, the
edition follows the vGPU type), a VM with passed-through GPUs as Virtual Compute Server
(4); guest.feature_type overrides. The written gridd.conf is the driver's template with
that one line changed."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from tests.labs.connect import FAST
from tests.labs.fixtures import ssh_lab
from tests.labs.sshlab import SshLab, lab_host_targets
from tests.provision.lab_jobs import guest_files
from vgpu.model.inventory import Drivers
from vgpu.model.load import load_inventory, load_scenario
from vgpu.model.scenario import Scenario
from vgpu.planner import build_plan
from vgpu.provision.adapter import HarnessOptions, jobs_from_plan
from vgpu.provision.fanout import Job, provision_all

ROOT = Path(__file__).resolve().parents[2]
STEPS = ("os-facts", "nvidia-driver", "vgpu-licensing")


def scenario(name: str, **guest: Any) -> Scenario:
    loaded = load_scenario(ROOT / "scenarios" / f"{name}.yaml")
    return loaded.model_copy(update={"guest": loaded.guest.model_copy(update=guest)})


def first_job(chosen: Scenario, files: Path) -> Job:
    driver, token = guest_files(files)
    inventory = load_inventory(ROOT / "inventory" / "sim.yaml").model_copy(update={
        "drivers": Drivers(guest_driver=str(driver), licence_token=str(token))})
    return jobs_from_plan(build_plan(chosen, inventory), chosen, inventory,
                          inventory_dir=files,
                          harness=HarnessOptions(install_requirements=False))[0]


def test_feature_type_follows_the_vms_gpus(tmp_path: Path) -> None:
    assert first_job(scenario("mig_7x1g"), tmp_path).requirements.feature_type == 1
    assert first_job(scenario("mig_1x4g"), tmp_path).requirements.feature_type == 1
    licensed_passthrough = first_job(scenario("passthrough_1gpu", driver="vgpu-guest",
                                              licensing=True), tmp_path).requirements
    assert licensed_passthrough.feature_type == 4
    assert "vgpu-licensing" in licensed_passthrough.steps
    assert first_job(scenario("mig_7x1g", feature_type=2),
                     tmp_path).requirements.feature_type == 2


lab = ssh_lab(1)


def gridd_conf(lab: SshLab, job: Job, tmp: Path) -> str:
    req = dataclasses.replace(job.requirements, steps=STEPS, licence_timeout_s=5)
    report = provision_all([Job(lab_host_targets(lab)(job.target), req)], options=FAST,
                           log_dir=tmp / "logs", state_dir=tmp / "state", concurrency=1)
    assert report.exit_code == 0, report.failure_lines()
    return (lab.hosts[0].system_root / "etc/nvidia/gridd.conf").read_text()


@pytest.mark.sshd
def test_vgpu_guest_gets_feature_type_1_in_the_templates_gridd_conf(
        lab: SshLab, tmp_path: Path) -> None:
    conf = gridd_conf(lab, first_job(scenario("mig_7x1g"), tmp_path), tmp_path)
    template = (lab.hosts[0].system_root / "etc/nvidia/gridd.conf.template").read_text()
    assert "\nFeatureType=0\n" in template
    assert conf == template.replace("\nFeatureType=0\n", "\nFeatureType=1\n")


@pytest.mark.sshd
def test_licensed_passthrough_guest_gets_feature_type_4(lab: SshLab, tmp_path: Path) -> None:
    job = first_job(scenario("passthrough_1gpu", driver="vgpu-guest", licensing=True), tmp_path)
    conf = gridd_conf(lab, job, tmp_path)
    assert [line for line in conf.splitlines() if line.startswith("FeatureType")] == \
        ["FeatureType=4"]

"""Steps harness-image and gpu-probe over real SSH against the private Docker daemon.

The sshd lab's guests are unix users of this machine, so the docker lab's socket is opened
to them for the test (and closed again). The scenario plans VMs without a GPU, so the plan
gives them ONNX Runtime's CPU build (the GPU build cannot run here), built FROM the lab's
Debian base image. The GPU probe cannot pass here: the test checks its messages when
nvidia-uvm does not load (no /dev/nvidia-uvm), when docker has no NVIDIA runtime, and when
the container finds no CUDA device."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
from functools import partial
from pathlib import Path

import pytest
import yaml

from loadgen import HARNESS_VERSION
from tests.labs.dockerlab import BASE_TAG, HARNESS_TAG, HarnessLab
from tests.labs.sshlab import SshLab
from tests.provision.lab_jobs import provision_jobs, target
from vgpu.container.docker import DockerCli
from vgpu.container.images import DOCKERFILE, data_file_text
from vgpu.model.load import load_inventory, load_scenario
from vgpu.planner import build_plan
from vgpu.provision.adapter import jobs_from_plan
from vgpu.provision.fanout import Job
from vgpu.provision.requirements import GuestRequirements, HarnessImageSpec
from vgpu.provision.step import Outcome
from vgpu.provision.steps.gpuprobe import TOOLKIT_FIX

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.docker, pytest.mark.sshd, pytest.mark.slow, pytest.mark.timeout(2400)]
TEST_TAG = "vgpu-harness:provision-test"
PIN = re.search(r"^ARG ORT_VERSION=(\S+)$", data_file_text(DOCKERFILE), re.MULTILINE)
ORT_PIN = PIN.group(1) if PIN else "?"
SCENARIO = {"id": "img", "name": "harness image in the docker lab", "gpu": "A100-80GB",
            "vms": [{"name": "vm", "count": 2}],
            "guest": {"base_image": BASE_TAG, "licensing": False},
            "workloads": [{"model": "resnet50"}]}
NO_GPUS_DOCKER = """#!/bin/bash
# TEST STAND-IN: the real docker CLI without --gpus, so the probe's container starts on a
# machine without a GPU and finds no CUDA device.
args=(); skip=0
for arg in "$@"; do
    if [ "$skip" = 1 ]; then skip=0; continue; fi
    if [ "$arg" = --gpus ]; then skip=1; continue; fi
    args+=("$arg")
done
exec {docker} "${{args[@]}}"
"""


def planned_jobs(lab: SshLab, address: str, tmp: Path) -> list[Job]:
    """The scenario's plan on the simulator inventory (IP pool from 127.0.0.11, like the
    lab) with docker.host set, each VM then reached on its lab host."""
    scenario_file = tmp / "scenario.yaml"
    scenario_file.write_text(yaml.safe_dump(SCENARIO))
    scenario = load_scenario(scenario_file)
    inventory = load_inventory(ROOT / "inventory" / "sim.yaml")
    inventory = inventory.model_copy(update={"docker": inventory.docker.model_copy(
        update={"host": address})})
    jobs = jobs_from_plan(build_plan(scenario, inventory), scenario, inventory,
                          inventory_dir=tmp)
    by_address = {h.address: h for h in lab.hosts}
    result = []
    for job in jobs:
        assert job.requirements.image is not None
        image = dataclasses.replace(job.requirements.image, tag=TEST_TAG)
        req = dataclasses.replace(job.requirements, steps=("os-facts", "harness-image"),
                                  image=image)
        result.append(Job(target(by_address[job.target.address]), req))
    return result


# One host at a time (provision_jobs' default): the lab's guests share one daemon (real
# guests have their own), so the second guest finds the image the first one built.
provision = partial(provision_jobs, scenario="img", log_folder="logs")


def guest_image_id(lab: SshLab, address: str) -> str:
    host = lab.hosts[0]
    done = subprocess.run(
        ["ssh", "-i", str(host.key_path), "-o", f"UserKnownHostsFile={host.known_hosts_path}",
         "-o", "BatchMode=yes", "-p", str(host.port), f"{host.user}@{host.address}",
         f"docker -H {address} image inspect --format '{{{{.Id}}}}' {TEST_TAG}"],
        capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_harness_image_is_built_once_on_the_guests(daemon: str, docker_lab: HarnessLab,
                                                   tmp_path: Path) -> None:
    docker_lab.lab.docker("rmi", TEST_TAG, check=False)
    try:
        with SshLab(2, guest_sim=False) as lab:
            jobs = planned_jobs(lab, daemon, tmp_path)
            assert {j.requirements.image.ort_package for j in jobs  # type: ignore[union-attr]
                    } == {"onnxruntime"}
            dry = provision(jobs, tmp_path, "dry", dry_run=True)
            assert [h.step("harness-image").outcome for h in dry.hosts] == \
                [Outcome.WOULD_CHANGE] * 2
            assert docker_lab.lab.image_id(TEST_TAG) is None

            first = provision(jobs, tmp_path, "first")
            assert first.exit_code == 0, first.failure_lines()
            image_id = docker_lab.lab.image_id(TEST_TAG)
            assert image_id and guest_image_id(lab, daemon) == image_id
            built, found = (h.step("harness-image") for h in first.hosts)
            assert (built.outcome, found.outcome) == (Outcome.CHANGED, Outcome.OK)
            assert built.detail == (f"{TEST_TAG} {image_id}; harness {HARNESS_VERSION}; "
                                    f"onnxruntime {ORT_PIN} (AzureExecutionProvider, "
                                    "CPUExecutionProvider)")
            assert found.detail == (f"{TEST_TAG} {image_id}; harness {HARNESS_VERSION}; "
                                    f"onnxruntime {ORT_PIN}")

            second = provision(jobs, tmp_path, "second")
            assert second.exit_code == 0, second.failure_lines()
            for host in second.hosts:
                assert host.count(Outcome.CHANGED) == 0
                assert host.step("harness-image").detail.startswith(f"{TEST_TAG} {image_id}")
            assert docker_lab.lab.image_id(TEST_TAG) == image_id
    finally:
        docker_lab.lab.docker("rmi", TEST_TAG, check=False)


def probe_job(lab: SshLab, docker: DockerCli) -> Job:
    req = GuestRequirements(steps=("os-facts", "gpu-probe"),
                            image=HarnessImageSpec(tag=HARNESS_TAG), docker=docker,
                            expected_vgpu_types=("A100D-1-10C",),
                            expected_mig_profiles=("1g.10gb",))
    return Job(target(lab.hosts[0]), req)


def probe_failure(lab: SshLab, docker: DockerCli, tmp: Path, name: str) -> tuple[str, str]:
    report = provision([probe_job(lab, docker)], tmp, name)
    failure = report.hosts[0].failure
    assert failure is not None and failure.step == "gpu-probe", report.hosts[0]
    return failure.detail, str(failure.fix)


def test_gpu_probe_fails_clearly_without_a_gpu(daemon: str, tmp_path: Path) -> None:
    real_docker = shutil.which("docker")
    assert real_docker
    with SshLab(1) as lab:
        host = lab.hosts[0]
        host.set_sim("driver_version", "550.54.15")
        cli = DockerCli(binary=real_docker, host=daemon)

        host.set_sim("uvm-fails", "1")
        detail, fix = probe_failure(lab, cli, tmp_path, "no-uvm")
        assert "/dev/nvidia-uvm is missing" in detail and "nvidia-modprobe" in fix
        host.set_sim("uvm-fails", None)  # from here nvidia-modprobe makes the node

        detail, fix = probe_failure(lab, cli, tmp_path, "no-runtime")
        assert detail.startswith("docker could not run the probe on MIG-")
        assert "could not select device driver" in detail and fix == TOOLKIT_FIX

        wrapper = host.put_executable("docker-no-gpus",
                                      NO_GPUS_DOCKER.format(docker=real_docker))
        detail, fix = probe_failure(lab, DockerCli(binary=str(wrapper), host=daemon),
                                    tmp_path, "no-cuda")
        assert "(1g.10gb): no CUDA device in the container: no libcuda.so.1" in detail
        assert "driver 550.54.15" in detail and "nvidia-container-toolkit" in fix

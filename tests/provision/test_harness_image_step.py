"""Step harness-image without a host: the docker commands it sends (all through the
inventory's CLI), how it reads `docker image inspect` and `loadgen --version`, what a dry
run does, and how failures name host, step, docker's output and the fix."""

from __future__ import annotations

import io
import json
import shlex
import tarfile

import pytest

import loadgen
from tests.provision.scripted import ScriptedTransport
from vgpu.container.docker import DockerCli
from vgpu.container.images import DEFAULT_BASE_IMAGE, default_tag, harness_digest
from vgpu.provision.requirements import GuestRequirements, HarnessImageSpec
from vgpu.provision.runner import provision_host
from vgpu.provision.step import HostContext, Outcome, StepFailed
from vgpu.provision.steps import build_steps
from vgpu.provision.steps.dockercmd import last_json
from vgpu.provision.steps.image import (
    BASE_LABEL,
    CONTENT_LABEL,
    ORT_PACKAGE_LABEL,
    VERSION_LABEL,
    HarnessImageStep,
    ImageFacts,
    image_problems,
    parse_inspect,
)
from vgpu.remote.targets import HostTarget

V = loadgen.HARNESS_VERSION
TAG = default_tag()
CLI = DockerCli(host="unix:///run/lab/docker.sock")
DOCKER = "docker -H unix:///run/lab/docker.sock"
IMAGE_ID = "sha256:" + "ab" * 32
NOT_FOUND = (1, "", f"Error response from daemon: No such image: {TAG}")
NGC_BANNER = ("\n=============\n== PyTorch ==\n=============\n\nNVIDIA Release 24.10 (build "
              "114410972)\nPyTorch Version 2.5.0a0+e000cf0\n\nWARNING: The NVIDIA Driver was "
              "not detected.  GPU functionality will not be available.\n\n")


def labels(**changes: str) -> dict[str, str]:
    base = {VERSION_LABEL: V, ORT_PACKAGE_LABEL: "onnxruntime-gpu",
            "vgpu.harness.ort-version": "1.23.2", BASE_LABEL: DEFAULT_BASE_IMAGE,
            CONTENT_LABEL: harness_digest()}
    return {**base, **changes}


def inspect_out(image_id: str = IMAGE_ID, **changes: str) -> tuple[int, str, str]:
    return 0, f"{image_id} {json.dumps(labels(**changes))}\n", ""


def version_out(harness: str = V, banner: str = NGC_BANNER) -> tuple[int, str, str]:
    info = {"harness": harness, "onnxruntime": {
        "package": "onnxruntime-gpu", "version": "1.23.2",
        "providers": ["TensorrtExecutionProvider", "CUDAExecutionProvider",
                      "CPUExecutionProvider"]}}
    return 0, banner + json.dumps(info, indent=2) + "\n", ""


def context(transport: ScriptedTransport, pull: str | None = None,
            dry_run: bool = False) -> HostContext:
    spec = HarnessImageSpec(ort_package="onnxruntime-gpu", pull=pull)
    req = GuestRequirements(steps=("harness-image",), image=spec, docker=CLI)
    return HostContext(HostTarget("vm-1", "10.0.0.5", "vgpu"), transport, req, dry_run=dry_run)


def test_parse_inspect_reads_the_id_and_labels() -> None:
    facts = parse_inspect(inspect_out()[1])
    assert facts.image_id == IMAGE_ID and facts.labels[VERSION_LABEL] == V
    assert parse_inspect(f"{IMAGE_ID} null\n") == ImageFacts(IMAGE_ID, {})
    with pytest.raises(ValueError):
        parse_inspect("")


def test_image_problems_compare_version_build_and_base() -> None:
    spec = HarnessImageSpec(ort_package="onnxruntime-gpu")
    assert image_problems(ImageFacts(IMAGE_ID, labels()), spec) == []
    found = image_problems(ImageFacts(IMAGE_ID, labels(**{
        VERSION_LABEL: "0.9.0", ORT_PACKAGE_LABEL: "onnxruntime", BASE_LABEL: "debian:12"})), spec)
    assert found == [f"image has harness 0.9.0; want {V}",
                     "image has onnxruntime; want onnxruntime-gpu",
                     f"image built FROM debian:12; want {DEFAULT_BASE_IMAGE}"]
    assert image_problems(ImageFacts(IMAGE_ID, {}), spec)[0] == \
        f"image has harness (no label); want {V}"
    pulled = HarnessImageSpec(pull="registry.lab/harness:1")
    assert image_problems(ImageFacts(IMAGE_ID, {VERSION_LABEL: V}), pulled) == []


def test_an_image_of_the_same_version_built_from_other_sources_is_built_again() -> None:
    spec = HarnessImageSpec(ort_package="onnxruntime-gpu")
    stale = image_problems(ImageFacts(IMAGE_ID, labels(**{CONTENT_LABEL: "0123abcd"})), spec)
    assert stale == [f"image built from other harness sources (0123abcd); want "
                     f"{harness_digest()}"]
    assert len(harness_digest()) == 16 and harness_digest() == harness_digest()


def test_check_inspects_the_tag_through_the_inventory_cli() -> None:
    transport = ScriptedTransport({"image inspect": [inspect_out()]})
    checked = HarnessImageStep().check(context(transport))
    assert checked.done
    assert checked.detail == f"{TAG} {IMAGE_ID}; harness {V}; onnxruntime-gpu 1.23.2"
    assert transport.commands == [
        f"{DOCKER} image inspect --format '{{{{.Id}}}} {{{{json .Config.Labels}}}}' {TAG}"]


def test_a_missing_or_stale_image_is_not_done() -> None:
    transport = ScriptedTransport({"image inspect": [NOT_FOUND]})
    assert HarnessImageStep().check(context(transport)).detail == f"{TAG} is not on the guest"
    transport.answer("image inspect", inspect_out(**{VERSION_LABEL: "0.9.0"}))
    checked = HarnessImageStep().check(context(transport))
    assert not checked.done and "harness 0.9.0" in checked.detail


def build_commands(transport: ScriptedTransport) -> list[str]:
    transport.answer("image inspect", NOT_FOUND, inspect_out())
    transport.answer("mktemp -d", (0, "/tmp/vgpu-harness-build.Ab12\n", ""))
    transport.answer("loadgen --version", version_out())
    report = provision_host(context(transport), [HarnessImageStep()], "10.0.0.5")
    step = report.step("harness-image")
    assert step.outcome is Outcome.CHANGED, step
    assert step.detail == (f"{TAG} {IMAGE_ID}; harness {V}; onnxruntime-gpu 1.23.2 "
                           "(TensorrtExecutionProvider, CUDAExecutionProvider, "
                           "CPUExecutionProvider)")
    return transport.commands


def test_build_uploads_the_context_and_builds_with_the_classic_builder() -> None:
    transport = ScriptedTransport()
    commands = build_commands(transport)
    folder = "/tmp/vgpu-harness-build.Ab12"
    [build] = transport.ran(" build ")
    argv = shlex.split(build)
    assert argv[:5] == ["DOCKER_BUILDKIT=0", "docker", "-H", "unix:///run/lab/docker.sock",
                        "build"]
    assert argv[argv.index("-t") + 1] == TAG
    assert argv[argv.index("-f") + 1] == f"{folder}/context/Dockerfile"
    assert argv[-1] == f"{folder}/context"
    for arg in (f"BASE_IMAGE={DEFAULT_BASE_IMAGE}", "ORT_PACKAGE=onnxruntime-gpu",
                f"HARNESS_VERSION={V}"):
        assert arg in argv
    assert f"{BASE_LABEL}={DEFAULT_BASE_IMAGE}" in argv
    assert argv[argv.index("--network") + 1] == "host"
    assert transport.ran(f"tar -xzf {folder}/context.tar.gz -C {folder}/context")
    assert commands[-3] == f"rm -rf {folder}"
    with tarfile.open(fileobj=io.BytesIO(transport.files[f"{folder}/context.tar.gz"])) as tar:
        names = set(tar.getnames())
        assert all(m.uid == 0 and m.mtime == 0 for m in tar.getmembers())
    assert {"./Dockerfile", "./harness-requirements.txt", "./pip-ca.pem",
            "./loadgen/__init__.py"} <= names
    run = shlex.split(transport.ran("loadgen --version")[0])
    assert run == [*CLI.argv("run", "--rm", "--network", "none", TAG), "/opt/harness/bin/python",
                   "-m", "loadgen", "--version"]
    assert all(c.startswith((DOCKER, "DOCKER_BUILDKIT=0 " + DOCKER, "mktemp", "mkdir", "rm -rf"))
               for c in commands)


def test_pull_then_tag_instead_of_building() -> None:
    pulled = "registry.lab/vgpu-harness:" + V
    transport = ScriptedTransport({
        f"inspect --format '{{{{.Id}}}} {{{{json .Config.Labels}}}}' {pulled}":
            [NOT_FOUND, inspect_out()],
        "image inspect": [inspect_out()],
        "loadgen --version": [version_out()],
    })
    report = provision_host(context(transport, pull=pulled), [HarnessImageStep()], "h")
    assert report.step("harness-image").outcome is Outcome.CHANGED
    assert transport.ran(" pull ") == [f"{DOCKER} pull {pulled}"]
    assert transport.ran(" tag ") == [f"{DOCKER} tag {pulled} {TAG}"]
    assert not transport.ran(" build ") and not transport.files


def test_a_pulled_image_of_another_harness_fails_with_the_fix() -> None:
    pulled = "registry.lab/vgpu-harness:old"
    transport = ScriptedTransport({"image inspect": [inspect_out(**{VERSION_LABEL: "0.1"})]})
    report = provision_host(context(transport, pull=pulled), [HarnessImageStep()], "h")
    failure = report.failure
    assert failure is not None and failure.step == "harness-image"
    assert f"image has harness 0.1; want {V}" in failure.detail
    assert "push an image built by this vgpu version" in str(failure.fix)


def test_dry_run_only_inspects() -> None:
    transport = ScriptedTransport({"image inspect": [NOT_FOUND]})
    report = provision_host(context(transport, dry_run=True), [HarnessImageStep()], "h")
    assert report.step("harness-image").outcome is Outcome.WOULD_CHANGE
    assert all(" image inspect " in c for c in transport.commands) and not transport.files


def test_build_failure_names_host_step_docker_tail_and_fix() -> None:
    transport = ScriptedTransport({"image inspect": [NOT_FOUND]})
    transport.answer("mktemp -d", (0, "/tmp/b.1\n", ""))
    transport.answer(" build ", (1, "Step 5/12 : RUN pip install\nERROR: No matching "
                                    "distribution found for onnxruntime-gpu==1.23.2\n",
                                 "The command '/bin/sh -c pip install' returned a non-zero "
                                 "code: 1\n"))
    with pytest.raises(StepFailed) as failed:
        HarnessImageStep().apply(context(transport))
    text = str(failed.value)
    assert text.startswith("vm-1: step harness-image: building ")
    assert "(docker -H unix:///run/lab/docker.sock)" in text
    assert "No matching distribution found" in text and "returned a non-zero code" in text
    assert "reach the package index" in text and "guest.harness_image" in text
    assert transport.commands[-1] == "rm -rf /tmp/b.1"


def test_docker_unusable_fails_before_any_upload() -> None:
    denied = (1, "", "permission denied while trying to connect to the Docker daemon socket "
                     "at unix:///run/lab/docker.sock")
    transport = ScriptedTransport({"image inspect": [denied]})
    step = HarnessImageStep()
    checked = step.check(context(transport))
    assert not checked.done and "docker cannot be asked" in checked.detail
    with pytest.raises(StepFailed) as failed:
        step.apply(context(transport))
    assert "docker group" in str(failed.value.fix)
    assert not transport.files and len(transport.commands) == 1


def test_verify_rejects_another_harness_version() -> None:
    transport = ScriptedTransport({"image inspect": [inspect_out()],
                                   "loadgen --version": [version_out("0.0.1")]})
    with pytest.raises(StepFailed, match=f"runs harness 0.0.1; want {V}"):
        HarnessImageStep().verify(context(transport))


def test_last_json_skips_an_entrypoint_banner() -> None:
    assert last_json(version_out()[1])["harness"] == V  # type: ignore[index]
    assert last_json("no json here\n") is None
    assert last_json('{"a": 1}\ntrailing words\n') is None


def test_preflight_refuses_guests_without_docker() -> None:
    step = HarnessImageStep()
    req = GuestRequirements(steps=("harness-image",), image=HarnessImageSpec())
    assert step.preflight(req) == []
    [problem] = step.preflight(GuestRequirements(steps=(), image=HarnessImageSpec(),
                                                 container_runtime="apptainer"))
    assert problem[0] == "guest.container_runtime" and "runtime: host" in problem[2]
    assert [s.name for s in build_steps(req)] == ["os-facts", "harness-image"]


def test_a_pulled_image_needs_the_default_tag_on_it() -> None:
    pulled = "registry.lab/vgpu-harness:" + V
    transport = ScriptedTransport({
        f"{pulled}": [inspect_out()],
        "image inspect": [inspect_out(image_id="sha256:" + "cd" * 32)],
    })
    checked = HarnessImageStep().check(context(transport, pull=pulled))
    assert not checked.done and checked.detail == f"{TAG} is not tagged from {pulled}"

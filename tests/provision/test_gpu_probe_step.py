"""Step gpu-probe without a GPU: which devices it probes, the docker command it builds, how
it reads the probe's output (captured from real and failing runs), and its messages."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest

from tests.provision.scripted import ScriptedTransport
from vgpu.container.docker import DockerCli
from vgpu.provision.facts import parse_gpu_list
from vgpu.provision.requirements import GuestRequirements, HarnessImageSpec
from vgpu.provision.step import HostContext, StepFailed
from vgpu.provision.steps.dockercmd import shell
from vgpu.provision.steps.gpuprobe import (
    PROBE_SCRIPT,
    TOOLKIT_FIX,
    GpuProbeStep,
    parse_probe,
    planned_devices,
    probe_argv,
)
from vgpu.remote.targets import HostTarget

VGPU_GUEST = ("GPU 0: GRID A100D-1-10C (UUID: GPU-5f7f1a2e-3b0c-11ee-9c2b-0cc47a8b2e10)\n"
              "  MIG 1g.10gb     Device  0: (UUID: MIG-8a1c0a52-8b7c-5d3f-a1e2-4f6b7c8d9e0f)\n")
BARE_METAL = ("GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-0a0b0c0d-1111-2222-3333-444455556666)\n"
              "  MIG 4g.40gb     Device  0: (UUID: MIG-aaaaaaaa-0000-5000-8000-000000000001)\n"
              "  MIG 2g.20gb     Device  1: (UUID: MIG-aaaaaaaa-0000-5000-8000-000000000002)\n"
              "  MIG 1g.10gb     Device  2: (UUID: MIG-aaaaaaaa-0000-5000-8000-000000000003)\n"
              "  MIG 1g.10gb     Device  3: (UUID: MIG-aaaaaaaa-0000-5000-8000-000000000004)\n")
GPU_UUID = "GPU-5f7f1a2e-3b0c-11ee-9c2b-0cc47a8b2e10"
MIG_UUID = "MIG-8a1c0a52-8b7c-5d3f-a1e2-4f6b7c8d9e0f"  # the MIG device under the vGPU
TAG = "vgpu-harness:test"
CLI = DockerCli(host="unix:///run/lab/docker.sock")
TORCH_OK = ("\n=============\n== PyTorch ==\n=============\nNVIDIA Release 24.10\n\n"
            'VGPU-PROBE {"ok": true, "via": "torch", "cuda": "12.6", "driver_cuda": "12.4", '
            '"device": "GRID A100D-1-10C"}\n')
ORT_NO_CUDA = ('VGPU-PROBE {"ok": false, "via": "onnxruntime", "cuda": null, "driver_cuda": '
               'null, "device": null, "error": "no libcuda.so.1 in the container (libcuda.so.1: '
               'cannot open shared object file: No such file or directory)", "providers": '
               '["CPUExecutionProvider"]}\n')
NO_RUNTIME = ('docker: Error response from daemon: could not select device driver "" with '
              "capabilities: [[gpu]].\nRun 'docker run --help' for more information\n")


def requirements(**changes: object) -> GuestRequirements:
    values: dict[str, object] = {"steps": ("gpu-probe",), "image": HarnessImageSpec(tag=TAG),
                                 "docker": CLI, "expected_vgpu_types": ("A100D-1-10C",),
                                 "expected_mig_profiles": ("1g.10gb",), **changes}
    return GuestRequirements(**values)  # type: ignore[arg-type]


def guest(answers: dict[str, list[tuple[int, str, str]]] | None = None) -> ScriptedTransport:
    rules = {"nvidia-smi -L": [(0, VGPU_GUEST, "")], "test -e": [(0, "", "")],
             "--query-gpu=driver_version": [(0, "550.54.15\n", "")],
             "--gpus": [(0, TORCH_OK, "")]}
    return ScriptedTransport({**rules, **(answers or {})})


def ctx(transport: ScriptedTransport, **changes: object) -> HostContext:
    return HostContext(HostTarget("vm-1", "10.0.0.5", "vgpu"), transport,
                       requirements(**changes))


def test_planned_devices_vgpu_guest_bare_metal_and_passthrough() -> None:
    vm = planned_devices(parse_gpu_list(VGPU_GUEST), requirements())
    assert [d.uuid for d in vm] == [MIG_UUID]
    bare = planned_devices(parse_gpu_list(BARE_METAL), requirements(
        expected_vgpu_types=(), expected_mig_profiles=("1g.10gb", "4g.40gb")))
    assert [d.uuid[-2:] for d in bare] == ["01", "03"]
    whole = planned_devices(parse_gpu_list(BARE_METAL), requirements(
        expected_vgpu_types=(), expected_mig_profiles=()))
    assert [d.name for d in whole] == ["NVIDIA A100-SXM4-80GB"]


def test_probe_command() -> None:
    argv = probe_argv(TAG, GPU_UUID, CLI)
    assert argv == ["docker", "-H", "unix:///run/lab/docker.sock", "run", "--rm", "--network",
                    "none", "--gpus", f'"device={GPU_UUID}"', TAG, "/opt/harness/bin/python",
                    "-c", PROBE_SCRIPT]
    line = shell(argv)
    assert f"--gpus '\"device={GPU_UUID}\"' {TAG} /opt/harness/bin/python -c " in line
    assert shlex.split(line) == argv


def test_parse_probe_on_captured_outputs() -> None:
    ok = parse_probe(TORCH_OK)
    assert ok is not None and ok.ok and ok.summary() == "CUDA 12.6 via torch on GRID A100D-1-10C"
    assert ok.driver_cuda == "12.4"
    failed = parse_probe(ORT_NO_CUDA)
    assert failed is not None and not failed.ok and "libcuda.so.1" in str(failed.error)
    assert parse_probe(NO_RUNTIME) is None


@pytest.mark.slow
def test_probe_script_reports_no_cuda_here() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE_SCRIPT], capture_output=True, text=True,
                          timeout=120, check=True)
    result = parse_probe(done.stdout)
    assert result is not None and not result.ok and result.error
    assert json.loads(done.stdout.strip().splitlines()[-1].split(" ", 1)[1])["via"]


def test_a_working_device_records_driver_and_cuda() -> None:
    transport = guest()
    checked = GpuProbeStep().check(ctx(transport))
    assert checked.done
    assert checked.detail == (f"driver 550.54.15 (CUDA 12.4); {MIG_UUID}: CUDA 12.6 via torch "
                              "on GRID A100D-1-10C")
    assert transport.ran("test -e") == ["test -e /dev/nvidia-uvm"]
    assert transport.ran("--gpus") == [shell(probe_argv(TAG, MIG_UUID, CLI))]


def test_no_cuda_in_the_container_fails_clearly() -> None:
    with pytest.raises(StepFailed) as failed:
        GpuProbeStep().check(ctx(guest({"--gpus": [(0, ORT_NO_CUDA, "")]})))
    text = str(failed.value)
    assert text.startswith(f"vm-1: step gpu-probe: {MIG_UUID} (1g.10gb): no CUDA "
                           "device in the container: no libcuda.so.1")
    assert "driver 550.54.15" in text and "nvidia-container-toolkit" in text


def test_docker_without_the_nvidia_runtime_names_the_toolkit() -> None:
    with pytest.raises(StepFailed) as failed:
        GpuProbeStep().check(ctx(guest({"--gpus": [(125, "", NO_RUNTIME)]})))
    assert "docker could not run the probe" in failed.value.message
    assert "could not select device driver" in failed.value.message
    assert failed.value.fix == TOOLKIT_FIX


def test_missing_uvm_and_missing_devices() -> None:
    with pytest.raises(StepFailed, match="/dev/nvidia-uvm is missing") as failed:
        GpuProbeStep().check(ctx(guest({"test -e": [(1, "", "")]})))
    assert "nvidia-modprobe -u" in str(failed.value.fix)
    with pytest.raises(StepFailed, match="lists none of the planned devices"):
        GpuProbeStep().check(ctx(guest(), expected_vgpu_types=(),
                                 expected_mig_profiles=("7g.80gb",)))
    with pytest.raises(StepFailed, match="nvidia-smi -L failed"):
        GpuProbeStep().check(ctx(guest({"nvidia-smi -L": [(9, "NVIDIA-SMI has failed", "")]})))

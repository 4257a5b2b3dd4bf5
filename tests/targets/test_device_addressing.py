"""Every harness instance names its device by UUID, read from `nvidia-smi -L` in the guest
(the SSH lab's simulated driver over real SSH): a VM with four GPUs passed through gives
instance k GPU k's UUID in its container, its spec and its CUDA_VISIBLE_DEVICES, never an
index (in a container given one GPU only index 0 exists); a MIG-backed vGPU guest gives
its instance the MIG device under the vGPU, which is what CUDA and docker address."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from loadgen.device import bind_device
from loadgen.spec import parse_spec
from tests.labs.connect import FAST
from tests.labs.sshlab import LabHost, SshLab, lab_available
from tests.provision.lab_jobs import target
from vgpu import catalog
from vgpu.bench.workload import BenchOverrides, effective_workload, harness_spec
from vgpu.container.docker import DockerCli
from vgpu.errors import RemoteError
from vgpu.model.load import load_inventory
from vgpu.model.scenario import InferenceWorkload
from vgpu.planner import build_plan
from vgpu.provision.facts import GPU_LIST
from vgpu.provision.requirements import GuestRequirements
from vgpu.provision.steps.gpuprobe import planned_devices, probe_argv
from vgpu.remote.hostlog import HostLog
from vgpu.remote.redact import Redactor
from vgpu.remote.ssh import SSHTransport
from vgpu.results.store.records import Platform
from vgpu.targets.connect import _target
from vgpu.targets.containers import ContainerLaunch
from vgpu.targets.hostprobe import HostHarness
from vgpu.targets.placements import HarnessPlacement, per_whole_gpu
from vgpu.targets.target import Target

ROOT = Path(__file__).resolve().parents[2]
GPU_PROVIDERS = ["CUDAExecutionProvider", "CPUExecutionProvider"]
WORKLOAD = effective_workload(
    InferenceWorkload(model="resnet50", scenario="Offline", batch=8, precision="fp16",
                      duration_s=60), on_cpu=False, overrides=BenchOverrides())

pytestmark = [
    pytest.mark.sshd,
    pytest.mark.skipif(lab_available() is not None, reason=str(lab_available())),
]


@pytest.fixture
def guest(tmp_path: Path) -> Iterator[tuple[LabHost, SSHTransport]]:
    with SshLab(1) as lab:
        host = lab.hosts[0]
        host.set_sim("driver_version", "550.127.05")
        transport = SSHTransport(target(host), FAST, HostLog(tmp_path / "host.log", Redactor()))
        transport.connect()
        try:
            yield host, transport
        finally:
            transport.close()


def harness_on(transport: SSHTransport) -> HostHarness:
    """The guest as `vgpu bench` reads it: its `nvidia-smi -L`, and a harness image whose
    ONNX Runtime has the CUDA provider (the GPU build; no GPU runs it here)."""
    listed = transport.run(GPU_LIST.command, timeout=60, check=True)
    return HostHarness(transport, "python -m loadgen", "/home/lab/.vgpu/bench", GPU_PROVIDERS,
                       GPU_LIST.process(listed.stdout),
                       container=ContainerLaunch(image="vgpu-harness:1", session="s"))


def what_the_instance_gets(t: Target, tmp_path: Path,
                           monkeypatch: pytest.MonkeyPatch) -> tuple[str, str, str]:
    """The container's --gpus device, the spec's device UUID and the CUDA_VISIBLE_DEVICES
    the harness sets from that spec in the container."""
    argv = shlex.split(t.command("spec.json", f"/home/lab/.vgpu/bench/r1/{t.instance}", "r1"))
    gpus = argv[argv.index("--gpus") + 1]
    assert not any(a.startswith("CUDA_VISIBLE_DEVICES=") for a in argv)
    spec = parse_spec(harness_spec(WORKLOAD, instance=t.instance, device=t.device,
                                   threads=None).to_json(), "spec.json", tmp_path)
    assert spec.device.index is None
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return gpus, spec.device.uuid or "", bind_device(spec.device).cuda_visible_devices or ""


def test_four_passthrough_gpus_each_instance_names_its_own_uuid(
        guest: tuple[LabHost, SSHTransport], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    host, transport = guest
    host.set_hardware("", None, gpu_count=4, gpu_name="NVIDIA A100 80GB PCIe")
    harness = harness_on(transport)
    uuids = [d.uuid for d in harness.listing.gpu_devices]
    assert len(set(uuids)) == 4 and all(u.startswith("GPU-") for u in uuids)
    [vm] = build_plan(catalog.load("pt4"), load_inventory(ROOT / "inventory" / "sim.yaml")).vms
    base = HarnessPlacement(vm.name, target(host), "passthrough", "vm",
                     Platform(attachment="passthrough"))
    targets = [_target(p, harness, [], allow_cpu=False) for p in per_whole_gpu(vm, base)]
    assert [t.device for t in targets] == [{"kind": "gpu", "uuid": u} for u in uuids]
    got = [what_the_instance_gets(t, tmp_path, monkeypatch) for t in targets]
    assert got == [(f'"device={u}"', u, u) for u in uuids]


def test_a_planned_gpu_the_guest_lacks_is_refused(
        guest: tuple[LabHost, SSHTransport]) -> None:
    host, transport = guest
    host.set_hardware("", None, gpu_count=3, gpu_name="NVIDIA A100 80GB PCIe")
    harness = harness_on(transport)
    [vm] = build_plan(catalog.load("pt4"), load_inventory(ROOT / "inventory" / "sim.yaml")).vms
    base = HarnessPlacement(vm.name, target(host), "passthrough", "vm", Platform())
    last = per_whole_gpu(vm, base)[3]
    with pytest.raises(RemoteError, match="planned GPU 3 on vm-1, but `nvidia-smi -L` there "
                                        "lists 3 GPU"):
        _target(last, harness, [], allow_cpu=False)


def test_a_mig_backed_vgpu_instance_gets_the_mig_device_under_its_vgpu(
        guest: tuple[LabHost, SSHTransport], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    host, transport = guest
    host.set_hardware("A100D-1-10C", "1g.10gb")  # what scenario 6's s6-1g VM sees
    harness = harness_on(transport)
    [vgpu], [mig_device] = harness.listing.gpu_devices, harness.listing.mig_devices
    assert vgpu.name == "GRID A100D-1-10C" and vgpu.uuid.startswith("GPU-")
    assert mig_device.uuid.startswith("MIG-")
    [vm] = [v for v in build_plan(catalog.load("6"), load_inventory(
        ROOT / "inventory" / "sim.yaml")).vms if v.name == "s6-1g"]
    base = HarnessPlacement(vm.name, target(host), "1g.10gb", "vm",
                     Platform(vgpu_profile="grid_a100d-1-10c", mig_profile="1g.10gb"))
    [placement] = per_whole_gpu(vm, base)
    instance = _target(placement, harness, [], allow_cpu=False)
    assert instance.device == {"kind": "mig", "uuid": mig_device.uuid}
    assert what_the_instance_gets(instance, tmp_path, monkeypatch) == (
        f'"device={mig_device.uuid}"', mig_device.uuid, mig_device.uuid)


def test_the_gpu_probe_runs_on_the_mig_device_of_each_vgpu(
        guest: tuple[LabHost, SSHTransport]) -> None:
    host, transport = guest
    host.set_hardware("A100D-2-20C", "2g.20gb", gpu_count=2)
    listing = harness_on(transport).listing
    requirements = GuestRequirements(steps=("gpu-probe",),
                                     expected_vgpu_types=("A100D-2-20C", "A100D-2-20C"),
                                     expected_mig_profiles=("2g.20gb", "2g.20gb"))
    probed = planned_devices(listing, requirements)
    assert [d.uuid for d in probed] == [d.uuid for d in listing.mig_devices]
    argv = probe_argv("vgpu-harness:1", probed[1].uuid, DockerCli())
    assert argv[argv.index("--gpus") + 1] == f'"device={listing.mig_devices[1].uuid}"'

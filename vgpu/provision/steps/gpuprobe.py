"""GPU readiness in the harness container (step gpu-probe): every planned device, by its UUID
from ``nvidia-smi -L``, runs a small CUDA computation in a container of the harness image
(torch where the image has it, else ONNX Runtime's CUDA provider), and /dev/nvidia-uvm
exists (made with nvidia-modprobe where no CUDA program has made it yet). The detail
records the driver and the CUDA version the container saw."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from vgpu import stepnames
from vgpu.container import docker
from vgpu.container.spec import HARNESS_PYTHON
from vgpu.provision.facts import DRIVER_VERSIONS, GPU_LIST, GpuListing, ListedDevice
from vgpu.provision.requirements import GuestRequirements
from vgpu.provision.step import Check, HostContext, Step, StepFailed, guest_step
from vgpu.provision.steps.dockercmd import docker_fix, output_tail, shell
from vgpu.remote.transport import CommandResult, quote

UVM_DEVICE = "/dev/nvidia-uvm"
UVM_COMMAND = "nvidia-modprobe -u -c=0"  # loads nvidia-uvm and creates its device nodes
PROBE_MARK = "VGPU-PROBE "
PROBE_TIMEOUT_S = 300.0
NO_GPU_RUNTIME = "could not select device driver"
TOOLKIT_FIX = ("install and configure the NVIDIA container toolkit (step "
               "nvidia-container-toolkit: `nvidia-ctk runtime configure --runtime=docker`, then "
               "restart docker)")
PROBE_SCRIPT = """\
import ctypes, json
out = {"ok": False, "via": None, "cuda": None, "driver_cuda": None, "device": None}
try:
    v = ctypes.c_int()
    ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(v))
    out["driver_cuda"] = f"{v.value // 1000}.{v.value % 1000 // 10}"
except OSError as exc:
    out["error"] = f"no libcuda.so.1 in the container ({exc})"
try:
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_available():
        x = torch.arange(1024.0, device="cuda")
        out.update(via="torch", cuda=torch.version.cuda, device=torch.cuda.get_device_name(0),
                   ok=float((x * 2).sum()) == 1047552.0)
    else:
        import numpy as np, onnxruntime as ort
        from onnx import TensorProto as T, helper as h
        io = [h.make_tensor_value_info(n, T.FLOAT, [4]) for n in "xy"]
        graph = h.make_graph([h.make_node("Add", ["x", "x"], ["y"])], "probe", io[:1], io[1:])
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=8)
        s = ort.InferenceSession(model.SerializeToString(), providers=["CUDAExecutionProvider"])
        out.update(via="onnxruntime", providers=s.get_providers())
        if s.get_providers()[0] == "CUDAExecutionProvider":
            y = s.run(None, {"x": np.arange(4, dtype=np.float32)})[0]
            from onnxruntime.capi import build_and_package_info as b
            out.update(ok=y.tolist() == [0.0, 2.0, 4.0, 6.0], cuda=getattr(b, "cuda_version", None))
        else:
            out.setdefault("error", "onnxruntime has no CUDA device (providers "
                           + ", ".join(ort.get_available_providers()) + ")")
except Exception as exc:
    out["error"] = repr(exc)
print("VGPU-PROBE " + json.dumps(out), flush=True)
"""


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    via: str | None
    cuda: str | None
    driver_cuda: str | None
    device: str | None
    error: str | None

    def summary(self) -> str:
        on = f" on {self.device}" if self.device else ""
        return f"CUDA {self.cuda or '?'} via {self.via}{on}"


def parse_probe(stdout: str) -> ProbeResult | None:
    """The probe's marked JSON line (None where the container never printed it)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(PROBE_MARK):
            data: dict[str, Any] = json.loads(line[len(PROBE_MARK):])
            return ProbeResult(ok=bool(data.get("ok")), via=data.get("via"),
                               cuda=data.get("cuda"), driver_cuda=data.get("driver_cuda"),
                               device=data.get("device"), error=data.get("error"))
    return None


def planned_devices(listing: GpuListing, req: GuestRequirements) -> list[ListedDevice]:
    """What the harness runs on: each vGPU (or passthrough GPU) is a GPU in its guest, a
    MIG-backed vGPU by the MIG device listed under it (CUDA and ``docker --gpus`` see only
    that one, not the vGPU's GPU- UUID); on bare metal, the MIG devices of the planned
    profiles."""
    if req.expected_vgpu_types or not req.expected_mig_profiles:
        return list(listing.compute_devices())
    wanted = Counter(req.expected_mig_profiles)
    picked = []
    for device in listing.mig_devices:
        if wanted[device.name] > 0:
            wanted[device.name] -= 1
            picked.append(device)
    return picked


def probe_argv(image: str, uuid: str, cli: docker.DockerCli) -> list[str]:
    return cli.argv("run", "--rm", "--network", "none", "--gpus", docker.gpus_value([uuid]),
                    image, HARNESS_PYTHON, "-c", PROBE_SCRIPT)


@guest_step
class GpuProbeStep(Step):
    name = stepnames.GPU_PROBE
    read_only = True

    def preflight(self, req: GuestRequirements) -> list[tuple[str, str, str]]:
        if req.image is None:
            return [("guest.runtime", "the GPU probe needs the harness image",
                     "plan the scenario with guest.runtime: container")]
        return []

    def _devices(self, ctx: HostContext) -> list[ListedDevice]:
        listed = ctx.run(GPU_LIST.command, timeout=60)
        if not listed.ok:
            raise self.fail(ctx, f"{GPU_LIST.command} failed: {listed.tail()}",
                            f"install the guest driver (step {stepnames.NVIDIA_DRIVER}) first")
        devices = planned_devices(GPU_LIST.process(listed.stdout), ctx.requirements)
        if not devices:
            raise self.fail(ctx, f"{GPU_LIST.command} lists none of the planned devices",
                            f"check the VM's vGPU (step {stepnames.VERIFY_GPU}) or the host's "
                            "MIG devices")
        return devices

    def check(self, ctx: HostContext) -> Check:
        assert ctx.requirements.image is not None
        devices = self._devices(ctx)
        self._ensure_uvm_device(ctx)
        versions = DRIVER_VERSIONS.process(ctx.run(DRIVER_VERSIONS.command, timeout=60).stdout)
        driver = ", ".join(sorted(versions)) or "unknown"
        results = [self._probe(ctx, ctx.requirements.image.tag, d, driver) for d in devices]
        return Check(True, f"driver {driver} (CUDA {results[0].driver_cuda or '?'}); "
                     + "; ".join(f"{d.uuid}: {r.summary()}"
                                 for d, r in zip(devices, results, strict=True)))

    def _ensure_uvm_device(self, ctx: HostContext) -> None:
        """/dev/nvidia-uvm appears only once something loads nvidia-uvm (the first CUDA
        program on the host, or nvidia-modprobe); a container started before that finds no
        CUDA device, so create it first."""
        uvm = ctx.path(UVM_DEVICE)
        if ctx.run(f"test -e {quote(uvm)}").ok:
            return
        fix = ("load the module: `sudo nvidia-modprobe -u -c=0` (or `sudo modprobe "
               "nvidia-uvm`), and look at `dmesg` for why nvidia-uvm does not load")
        if ctx.dry_run:
            raise self.fail(ctx, f"{uvm} is missing; `{UVM_COMMAND}` would create it", fix)
        made = ctx.run(UVM_COMMAND, sudo=True, timeout=60)
        if not ctx.run(f"test -e {quote(uvm)}").ok:
            why = f"`{UVM_COMMAND}` exited {made.exit_code}: {made.tail()}" if not made.ok \
                else f"`{UVM_COMMAND}` did not create it"
            raise self.fail(ctx, f"{uvm} is missing: CUDA cannot start in containers; {why}",
                            fix)

    def _probe(self, ctx: HostContext, image: str, device: ListedDevice,
               driver: str) -> ProbeResult:
        ran = ctx.run(shell(probe_argv(image, device.uuid, ctx.requirements.docker)),
                      timeout=PROBE_TIMEOUT_S)
        result = parse_probe(ran.stdout)
        if result is None:
            raise self._no_container(ctx, device, ran)
        if not result.ok:
            raise self.fail(ctx, f"{device.uuid} ({device.name}): no CUDA device in the "
                            f"container: {result.error or 'the computation gave a wrong result'}"
                            f"; driver {driver}, driver CUDA {result.driver_cuda or 'unknown'}",
                            "check the NVIDIA container toolkit (step nvidia-container-toolkit), "
                            "the guest driver and that the image's CUDA suits the driver "
                            "(guest.base_image)")
        return result

    def _no_container(self, ctx: HostContext, device: ListedDevice,
                      ran: CommandResult) -> StepFailed:
        text = ran.stdout + ran.stderr
        fix = TOOLKIT_FIX if NO_GPU_RUNTIME in text else docker_fix(
            ran, "see the host log; the harness image comes from step harness-image")
        return self.fail(ctx, f"docker could not run the probe on {device.uuid} "
                         f"({device.name}): exit {ran.exit_code}: {output_tail(ran)}", fix)

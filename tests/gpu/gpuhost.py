"""The GPU this acceptance suite runs on, read through NVML and nothing else (no CUDA
context, no change to the GPU): GPU 0, its driver, and the device the harness binds to,
which is the first MIG device when MIG mode is on and the whole GPU otherwise."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

GPU_INDEX = 0
CUDA_PROVIDER = "CUDAExecutionProvider"


class NoGpu(Exception):
    """Why there is no GPU to test here; the message starts with 'gpu:'."""


@dataclass(frozen=True)
class GpuHost:
    name: str
    uuid: str
    driver_version: str
    cuda_driver_version: str
    mig_current: bool | None  # None: the GPU has no MIG mode
    mig_pending: bool | None
    mig_device_uuid: str | None

    @property
    def device(self) -> dict[str, Any]:
        """The harness spec's device section for this GPU."""
        if self.mig_device_uuid is not None:
            return {"kind": "mig", "uuid": self.mig_device_uuid}
        return {"kind": "gpu", "uuid": self.uuid}

    @property
    def cuda_visible_devices(self) -> str:
        return self.mig_device_uuid or self.uuid

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "harness_device": self.device}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _mig(nvml: Any, handle: Any) -> tuple[bool | None, bool | None, str | None]:
    try:
        current, pending = nvml.nvmlDeviceGetMigMode(handle)
    except nvml.NVMLError:
        return None, None, None
    if not current:
        return False, bool(pending), None
    for index in range(nvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
        try:
            mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, index)
        except nvml.NVMLError:
            continue
        return True, bool(pending), _text(nvml.nvmlDeviceGetUUID(mig))
    raise NoGpu(f"gpu: MIG mode is on for GPU {GPU_INDEX} but it has no MIG device; this "
                f"suite never changes MIG: create one (vgpu mig apply) or turn MIG off")


def _open_nvml() -> Any:
    try:
        import pynvml
    except ImportError as exc:
        raise NoGpu(f"gpu: nvidia-ml-py (pynvml) is not installed: {exc}") from exc
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        raise NoGpu(f"gpu: no NVIDIA driver here (nvmlInit failed: {exc})") from exc
    if pynvml.nvmlDeviceGetCount() <= GPU_INDEX:
        raise NoGpu("gpu: NVML lists no GPU")
    return pynvml


def probe() -> GpuHost:
    """GPU 0 as NVML reports it; raises NoGpu where there is none."""
    nvml = _open_nvml()
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(GPU_INDEX)
        cuda = nvml.nvmlSystemGetCudaDriverVersion()
        current, pending, mig_uuid = _mig(nvml, handle)
        return GpuHost(
            name=_text(nvml.nvmlDeviceGetName(handle)),
            uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
            driver_version=_text(nvml.nvmlSystemGetDriverVersion()),
            cuda_driver_version=f"{cuda // 1000}.{cuda % 1000 // 10}",
            mig_current=current, mig_pending=pending, mig_device_uuid=mig_uuid)
    finally:
        nvml.nvmlShutdown()


NO_ORT_GPU_ENV = "VGPU_NO_ORT_GPU"  # gpu-check.sh --no-ort-gpu


def missing_cuda_provider(version: str | None, providers: list[str],
                          no_ort_gpu: bool) -> tuple[str, str] | None:
    """On a GPU host: None when onnxruntime has its CUDA provider, else what to do about
    it: ("skip", reason) when the run said --no-ort-gpu, ("fail", reason) otherwise."""
    if CUDA_PROVIDER in providers:
        return None
    what = (f"onnxruntime {version} has no {CUDA_PROVIDER} (providers {providers})"
            if version else "onnxruntime is not installed")
    if no_ort_gpu:
        return "skip", f"gpu: optional: {what}; ONNX Runtime's GPU path left untested " \
                       f"(--no-ort-gpu)"
    return "fail", (f"{what} on a host with a GPU: install onnxruntime-gpu (docs/gpu-check.md "
                    f"says how it gets to a host without a package index), or run "
                    f"gpu-check.sh --no-ort-gpu to leave ONNX Runtime's GPU path untested")


NOT_IN_CATALOGUE = "is not in vgpu's MIG catalogue"
NO_PROFILES_LISTED = "NVML lists no MIG profiles"


def catalogue_outcome(returncode: int, stdout: str, stderr: str) -> tuple[str, Any]:
    """What `vgpu mig verify-catalogue --json` said: ("report", its JSON) on exit 0 or 1;
    ("skip", reason) where the catalogue cannot be compared here (a GPU vgpu does not know:
    a GPU skip; no profiles listed because MIG mode is off, which this suite never changes:
    an optional one); ("fail", reason) otherwise."""
    message = stderr.strip()[-1000:]
    if NOT_IN_CATALOGUE in stderr:
        return "skip", f"gpu: {message}"
    if NO_PROFILES_LISTED in stderr:
        return "skip", (f"gpu: optional: {message} (this suite never turns MIG on, so the "
                        f"catalogue is compared only on a GPU found with MIG mode on)")
    if returncode not in (0, 1) or not stdout.strip():
        return "fail", f"verify-catalogue exited {returncode} without a report: {message}"
    return "report", json.loads(stdout)

"""Process-group setup for one rank: under torchrun (RANK/WORLD_SIZE/MASTER_* in the
environment) or, without torchrun, as a world of one on this process."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class RankContext:
    rank: int
    local_rank: int
    node_rank: int  # torchrun's GROUP_RANK: which node this rank runs on
    world_size: int
    backend: str
    device: torch.device
    host: str

    @property
    def is_leader(self) -> bool:
        return self.rank == 0


class DeviceUnavailable(RuntimeError):
    """The spec asks for a GPU that this rank cannot see."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def resolve_backend(requested: str, device_kind: str) -> str:
    if requested != "auto":
        return requested
    return "nccl" if device_kind == "gpu" else "gloo"


def init_rank(device_kind: str, requested_backend: str, timeout_s: float) -> RankContext:
    """Joins (or, alone, creates) the default process group and binds this rank's device."""
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device_kind == "gpu":
        if not torch.cuda.is_available():
            raise DeviceUnavailable("device gpu requested but torch.cuda.is_available() is False")
        if local_rank >= torch.cuda.device_count():
            raise DeviceUnavailable(
                f"local rank {local_rank} has no GPU: only {torch.cuda.device_count()} visible"
            )
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    backend = resolve_backend(requested_backend, device_kind)
    if not dist.is_initialized():
        if "RANK" in os.environ:
            dist.init_process_group(backend, timeout=timedelta(seconds=timeout_s))
        else:
            dist.init_process_group(
                backend,
                init_method=f"tcp://127.0.0.1:{_free_port()}",
                rank=0,
                world_size=1,
                timeout=timedelta(seconds=timeout_s),
            )
    return RankContext(
        rank=dist.get_rank(),
        local_rank=local_rank,
        node_rank=int(os.environ.get("GROUP_RANK", "0")),
        world_size=dist.get_world_size(),
        backend=backend,
        device=device,
        host=socket.gethostname(),
    )


def synchronize(device: torch.device) -> None:
    """Waits for queued GPU work so that host timers measure it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def shutdown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def describe_device(device: torch.device) -> dict[str, str]:
    if device.type == "cuda":
        return {
            "kind": "gpu",
            "name": torch.cuda.get_device_name(device),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
            "cuda_version": str(torch.version.cuda),
        }
    return {"kind": "cpu", "name": _cpu_model(), "note": "CPU: no GPU/MIG slice used"}


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"

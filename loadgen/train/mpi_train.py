"""Data-parallel training with MPI as the communication runtime, Horovod-style: each rank
trains the bare model and, after backward, its gradients are averaged over MPI in buckets
(mpi4py Allreduce on the tensors' memory, no copy through Python objects).

The pip CPU build of torch has no MPI process group (torch.distributed.is_mpi_available()
is False), so DDP cannot run over MPI here; Horovod did the same reduction over MPI before
torch had one. The measured window, the no_sync-style communication probe and the record
are those of the torch.distributed trainer, so the runtimes compare run for run."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from loadgen.train import result
from loadgen.train.distributed import RankContext, describe_device
from loadgen.train.loop import RankTimings, Trainer, build_trainer, parameter_digest, timed
from loadgen.train.mpi_world import MpiRank, join_world
from loadgen.train.spec import TrainSpec

BUCKET_BYTES = 25 << 20  # DDP's default bucket cap; Horovod's fusion buffer is 64 MiB


def gradient_buckets(parameters: Sequence[nn.Parameter],
                     cap_bytes: int = BUCKET_BYTES) -> list[list[nn.Parameter]]:
    """Parameters in reverse order (the order backward produces their gradients), cut into
    buckets of at most ``cap_bytes`` (a larger single tensor is a bucket of its own)."""
    buckets: list[list[nn.Parameter]] = []
    current: list[nn.Parameter] = []
    filled = 0
    for parameter in reversed(list(parameters)):
        size = parameter.numel() * parameter.element_size()
        if current and filled + size > cap_bytes:
            buckets.append(current)
            current, filled = [], 0
        current.append(parameter)
        filled += size
    if current:
        buckets.append(current)
    return buckets


class GradientAverager:
    """Averages every parameter's gradient across the ranks, one Allreduce per bucket."""

    def __init__(self, world: MpiRank, model: nn.Module) -> None:
        self.world = world
        self.buckets = gradient_buckets([p for p in model.parameters() if p.requires_grad])

    def __call__(self) -> None:
        from mpi4py import MPI

        for bucket in self.buckets:
            flat = torch.cat([_grad(p).reshape(-1) for p in bucket]).contiguous()
            self.world.comm.Allreduce(MPI.IN_PLACE, flat.numpy(), op=MPI.SUM)
            flat /= self.world.size
            offset = 0
            for parameter in bucket:
                count = parameter.numel()
                parameter.grad = flat[offset:offset + count].view_as(parameter).clone()
                offset += count


def _grad(parameter: nn.Parameter) -> torch.Tensor:
    return parameter.grad if parameter.grad is not None else torch.zeros_like(parameter)


def _step(trainer: Trainer, average: Callable[[], None]) -> Callable[[], None]:
    def step() -> None:
        trainer.forward_backward()
        average()
        trainer.scaler.step(trainer.optimizer)
        trainer.scaler.update()

    return step


def _comm_probe(trainer: Trainer, average: Callable[[], None], world: MpiRank,
                steps: int) -> tuple[list[float], list[float]]:
    """Forward+backward with and without the gradient averaging, interleaved."""
    synced: list[float] = []
    unsynced: list[float] = []
    if world.size < 2:
        return synced, unsynced
    cpu = torch.device("cpu")

    def synced_fb() -> None:
        trainer.forward_backward()
        average()

    for _ in range(steps):
        synced.append(timed(cpu, synced_fb))
        unsynced.append(timed(cpu, trainer.forward_backward))
    trainer.optimizer.zero_grad(set_to_none=True)
    return synced, unsynced


def train_mpi_rank(spec: TrainSpec, world: MpiRank) -> RankTimings:
    if spec.threads is not None:
        torch.set_num_threads(spec.threads)
    ctx = RankContext(rank=world.rank, local_rank=world.local_rank, node_rank=world.node_rank,
                      world_size=world.size, backend="mpi", device=torch.device("cpu"),
                      host=world.host)
    trainer = build_trainer(spec, replace(ctx, world_size=1))  # the bare model: no DDP
    average = GradientAverager(world, trainer.model)
    step = _step(trainer, average)
    for _ in range(spec.warmup_steps):
        step()
    world.comm.Barrier()  # every rank starts the measured window together
    timed_start = time.time()
    step_times = [timed(ctx.device, step) for _ in range(spec.measured_steps)]
    timed_end = time.time()
    digest = parameter_digest(trainer.model)
    synced, unsynced = _comm_probe(trainer, average, world, spec.comm_probe_steps)
    return RankTimings(
        rank=world.rank, local_rank=world.local_rank, node_rank=world.node_rank,
        host=world.host, device="cpu", batch_size=spec.batch_size, step_times_s=step_times,
        timed_start_unix=timed_start, timed_end_unix=timed_end, synced_fb_s=synced,
        unsynced_fb_s=unsynced, param_digest=digest,
    )


def train_over_mpi(spec: TrainSpec, out_dir: Path) -> None:
    """Every rank trains; rank 0 writes the record (the torch.distributed trainer's shape,
    with the MPI library and the ranks and threads per node in its settings)."""
    world = join_world()
    gathered: list[dict[str, Any]] | None = world.comm.gather(
        train_mpi_rank(spec, world).to_dict(), root=0)
    if not world.is_leader or gathered is None:
        return
    record = result.base_record("train", spec.to_json(), "ok", "")
    record.update(result.training_totals(gathered))
    record.update(
        world_size=world.size, backend="mpi", device=describe_device(torch.device("cpu")),
        settings={
            "model": spec.model, "image_size": spec.image_size,
            "per_rank_batch": spec.batch_size, "precision": spec.precision,
            "warmup_steps": spec.warmup_steps, "measured_steps": spec.measured_steps,
            "torch_version": torch.__version__,
            "intra_op_threads": spec.threads or torch.get_num_threads(),
            "nodes": world.nodes, "ranks_per_node": world.local_size,
            "data_source": spec.data.source, "mpi_library": world.library,
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS", "unset"),
        },
        timed_start_unix=min(t["timed_start_unix"] for t in gathered),
        timed_end_unix=max(t["timed_end_unix"] for t in gathered),
    )
    result.write_record(out_dir, record)

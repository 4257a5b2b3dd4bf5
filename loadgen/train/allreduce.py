"""Allreduce bus-bandwidth probe over message sizes, reported the way nccl-tests does:
algbw = bytes / time and busbw = algbw * 2(n-1)/n, where time is the slowest rank's mean.
With one rank no byte crosses a link: busbw is null and the record says why."""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.distributed as dist

from loadgen.train.distributed import RankContext, synchronize
from loadgen.train.spec import AllreduceSpec

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


ONE_RANK_NOTE = ("one rank: the allreduce moves no data between devices, so there is no "
                 "bus bandwidth to report (busbw null); algbw is a local copy rate and says "
                 "nothing of a link")


def bus_bandwidth(algbw_bytes_per_s: float, world_size: int) -> float | None:
    """nccl-tests' bus-bandwidth factor for allreduce: each byte crosses 2(n-1)/n links;
    None for one rank, where it crosses none (nccl-tests' 0 would read as a dead link)."""
    if world_size < 2:
        return None
    return algbw_bytes_per_s * 2 * (world_size - 1) / world_size


def bandwidth_note(world_size: int) -> str | None:
    return ONE_RANK_NOTE if world_size < 2 else None


def _time_allreduce(tensor: torch.Tensor, ctx: RankContext, iterations: int) -> float:
    dist.barrier()
    synchronize(ctx.device)
    start = time.perf_counter()
    for _ in range(iterations):
        dist.all_reduce(tensor)
    synchronize(ctx.device)
    return (time.perf_counter() - start) / iterations


def probe_rank(spec: AllreduceSpec, ctx: RankContext) -> list[float]:
    """This rank's mean seconds per allreduce, one value per message size."""
    dtype = DTYPES[spec.dtype]
    element = torch.tensor([], dtype=dtype).element_size()
    seconds: list[float] = []
    for size in spec.sizes_bytes:
        tensor = torch.ones(size // element, dtype=dtype, device=ctx.device)
        if spec.warmup_iterations:
            _time_allreduce(tensor, ctx, spec.warmup_iterations)
        seconds.append(_time_allreduce(tensor, ctx, spec.iterations))
    return seconds


def bandwidth_rows(
    sizes_bytes: tuple[int, ...], per_rank_seconds: list[list[float]], world_size: int
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for index, size in enumerate(sizes_bytes):
        times = [ranks[index] for ranks in per_rank_seconds]
        slowest = max(times)
        algbw = size / slowest
        rows.append({
            "size_bytes": size,
            "time_us": slowest * 1e6,
            "time_us_per_rank": [t * 1e6 for t in times],
            "algbw_gb_s": algbw / 1e9,
            "busbw_gb_s": None if (busbw := bus_bandwidth(algbw, world_size)) is None
            else busbw / 1e9,
        })
    return rows

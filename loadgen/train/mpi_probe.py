"""OSU-style MPI micro-benchmarks over mpi4py, by message size: point-to-point latency
(osu_latency's ping-pong) and bandwidth (osu_bw's window of non-blocking sends), and the
latency of allreduce, allgather and broadcast with their bus bandwidth as nccl-tests
defines it, so that MPI, Gloo and NCCL read on one scale.

mpi4py rather than the OSU binaries: Debian packages no OSU micro-benchmarks, and the
probe then installs with the rest of the harness (pip) wherever OpenMPI is.

Each collective's time is the slowest rank's mean; the pair for point-to-point is rank 0
and the first rank on another node (rank 1 when all share one), the other ranks wait."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from loadgen.contract import OSU_LARGE_MESSAGE_BYTES
from loadgen.train.mpi_world import MpiRank
from loadgen.train.spec import MpiProbeSpec

# osu_bw keeps `window` messages in flight; above this many bytes in flight the window
# shrinks, so that 64 MiB messages over a 1 Gbit/s link take seconds, not minutes.
WINDOW_BYTES = 64 << 20
ACK_BYTES = 4


def bus_factor(op: str, world_size: int) -> float | None:
    """nccl-tests' bus-bandwidth factors; None where no byte crosses a link (one rank)."""
    if world_size < 2:
        return None
    return {"allreduce": 2 * (world_size - 1) / world_size,
            "allgather": (world_size - 1) / world_size,
            "bcast": 1.0, "bandwidth": 1.0}.get(op)


def iterations_for(spec: MpiProbeSpec, size: int) -> int:
    return spec.large_iterations if size > OSU_LARGE_MESSAGE_BYTES else spec.iterations


def window_for(spec: MpiProbeSpec, size: int) -> int:
    return max(1, min(spec.window, WINDOW_BYTES // size))


def peer_rank(node_ranks: list[int]) -> int:
    """Rank 0's partner: the first rank on another node, else rank 1."""
    return next((rank for rank, node in enumerate(node_ranks) if node != node_ranks[0]), 1)


def _buffer(size: int) -> tuple[np.ndarray, Any]:
    """float32 where the size allows (the reductions' usual type), else bytes."""
    from mpi4py import MPI

    if size % 4 == 0:
        return np.ones(size // 4, dtype=np.float32), MPI.FLOAT
    return np.ones(size, dtype=np.uint8), MPI.UNSIGNED_CHAR


def _timed(world: MpiRank, action: Callable[[], None], warmup: int, iterations: int) -> float:
    for _ in range(warmup):
        action()
    world.comm.Barrier()
    start = time.perf_counter()
    for _ in range(iterations):
        action()
    return time.perf_counter() - start


def _latency(world: MpiRank, peer: int, size: int, spec: MpiProbeSpec) -> float | None:
    """One-way latency in seconds on rank 0; None on the other ranks."""
    comm, data = world.comm, np.ones(size, dtype=np.uint8)

    def ping() -> None:
        if world.rank == 0:
            comm.Send(data, dest=peer)
            comm.Recv(data, source=peer)
        elif world.rank == peer:
            comm.Recv(data, source=0)
            comm.Send(data, dest=0)

    iterations = iterations_for(spec, size)
    elapsed = _timed(world, ping, spec.warmup_iterations, iterations)
    return elapsed / (2 * iterations) if world.rank == 0 else None


def _bandwidth(world: MpiRank, peer: int, size: int, spec: MpiProbeSpec) -> float | None:
    """Seconds per message in a full window on rank 0; None on the other ranks."""
    from mpi4py import MPI

    comm, data, ack = world.comm, np.ones(size, dtype=np.uint8), np.zeros(ACK_BYTES, np.uint8)
    window = window_for(spec, size)

    def burst() -> None:
        if world.rank == 0:
            MPI.Request.Waitall([comm.Isend(data, dest=peer, tag=1) for _ in range(window)])
            comm.Recv(ack, source=peer, tag=2)
        elif world.rank == peer:
            MPI.Request.Waitall([comm.Irecv(data, source=0, tag=1) for _ in range(window)])
            comm.Send(ack, dest=0, tag=2)

    iterations = iterations_for(spec, size)
    elapsed = _timed(world, burst, spec.warmup_iterations, iterations)
    return elapsed / (iterations * window) if world.rank == 0 else None


def _collective(world: MpiRank, op: str, size: int, spec: MpiProbeSpec) -> float:
    """This rank's mean seconds per call."""
    from mpi4py import MPI

    comm = world.comm
    data, kind = _buffer(size)
    if op == "allreduce":
        def action() -> None:
            comm.Allreduce(MPI.IN_PLACE, [data, kind], op=MPI.SUM)
    elif op == "allgather":
        gathered = np.empty(data.size * world.size, dtype=data.dtype)

        def action() -> None:
            comm.Allgather([data, kind], [gathered, kind])
    else:
        def action() -> None:
            comm.Bcast([data, kind], root=0)
    iterations = iterations_for(spec, size)
    return _timed(world, action, spec.warmup_iterations, iterations) / iterations


def _row(op: str, size: int, seconds: float, moved: int, world_size: int,
         iterations: int, **extra: Any) -> dict[str, Any]:
    algbw = moved / seconds
    factor = bus_factor(op, world_size)
    return {"op": op, "size_bytes": size, "time_us": seconds * 1e6, "iterations": iterations,
            "algbw_gb_s": algbw / 1e9,
            "busbw_gb_s": None if factor is None else algbw * factor / 1e9, **extra}


def probe_rows(world: MpiRank, spec: MpiProbeSpec) -> list[dict[str, Any]]:
    """Every rank runs this; rank 0's list holds the rows (the others' is empty)."""
    from mpi4py import MPI

    node_ranks = world.comm.allgather(world.node_rank)
    rows: list[dict[str, Any]] = []
    if world.size >= 2:
        peer = peer_rank(node_ranks)
        for size in spec.sizes_bytes:
            latency = _latency(world, peer, size, spec)
            if latency is not None:
                rows.append(_row("latency", size, latency, size, world.size,
                                 iterations_for(spec, size)))
                rows[-1]["busbw_gb_s"] = None  # a ping-pong measures delay, not a link's rate
        for size in spec.sizes_bytes:
            per_message = _bandwidth(world, peer, size, spec)
            if per_message is not None:
                rows.append(_row("bandwidth", size, per_message, size, 2,
                                 iterations_for(spec, size), window=window_for(spec, size)))
    for op in ("allreduce", "allgather", "bcast"):
        for size in spec.sizes_bytes:
            slowest = world.comm.reduce(_collective(world, op, size, spec), op=MPI.MAX, root=0)
            if world.rank == 0:
                moved = size * world.size if op == "allgather" else size
                rows.append(_row(op, size, slowest, moved, world.size,
                                 iterations_for(spec, size)))
    return rows


def probe_record(world: MpiRank, spec: MpiProbeSpec, rows: list[dict[str, Any]],
                 node_ranks: list[int]) -> dict[str, Any]:
    import mpi4py

    return {
        "world_size": world.size, "nodes": world.nodes, "backend": "mpi",
        "ranks_per_node": world.local_size, "mpi_library": world.library,
        "mpi4py_version": mpi4py.__version__,
        "pt2pt_pair": [0, peer_rank(node_ranks)] if world.size >= 2 else None,
        "pt2pt_crosses_nodes": world.nodes > 1,
        "rows": rows,
        "busbw_note": None if world.size >= 2 else "one rank: no link crossed, busbw null",
        "method": "OSU-style (osu_latency ping-pong, osu_bw window) over mpi4py; collective "
                  "time is the slowest rank's mean; busbw with nccl-tests' factors",
    }

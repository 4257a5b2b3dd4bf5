"""`python -m loadgen train SPEC --out DIR` and `python -m loadgen allreduce SPEC --out DIR`,
run by torchrun on every node (train with backend mpi, and mpiprobe, by mpirun). Exit
codes: 0 ok, 2 bad spec, 1 run failed (rank 0 still writes result.json with status failed;
any failing rank leaves rank<N>.failed.json)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from loadgen.errors import SpecError
from loadgen.train import result
from loadgen.train.spec import (
    AllreduceSpec,
    MpiProbeSpec,
    TrainSpec,
    load_allreduce_spec,
    load_mpi_probe_spec,
    load_train_spec,
)

EXIT_OK, EXIT_FAILED, EXIT_BAD_SPEC = 0, 1, 2


def _parser(command: str, what: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"python -m loadgen {command}", description=what)
    parser.add_argument("spec", type=Path, help="spec JSON (schema_version 1)")
    parser.add_argument("--out", type=Path, required=False, help="result directory")
    parser.add_argument(
        "--check", action="store_true",
        help="validate the spec and that torch imports, then exit (0 ok, 2 bad spec)",
    )
    return parser


def _rank_from_env() -> int:
    return int(os.environ.get("RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0")))


def _fail(out_dir: Path, kind: str, spec: dict[str, Any], exc: BaseException) -> int:
    reason = f"{type(exc).__name__}: {exc}"
    rank = _rank_from_env()
    detail = {"rank": rank, "reason": reason, "traceback": traceback.format_exc()}
    result.write_json_atomic(result.rank_failure_path(out_dir, rank), detail)
    if rank == 0:
        result.write_record(out_dir, result.base_record(kind, spec, "failed", reason))
    print(f"rank {rank} failed: {reason}", file=sys.stderr)
    return EXIT_FAILED


def _run(
    argv: Sequence[str] | None,
    command: str,
    what: str,
    load: Callable[[Path], TrainSpec | AllreduceSpec | MpiProbeSpec],
    body: Callable[[Any, Path], int],
) -> int:
    args = _parser(command, what).parse_args(argv)
    try:
        spec = load(args.spec)
    except SpecError as exc:
        print(f"error: invalid {command} spec\n{exc}", file=sys.stderr)
        return EXIT_BAD_SPEC
    if args.check:
        import torch  # the check exists to prove torch imports on this node

        print(json.dumps({"spec": "ok", "torch": torch.__version__}))
        return EXIT_OK
    if args.out is None:
        print("error: --out DIR is required to run", file=sys.stderr)
        return EXIT_BAD_SPEC
    try:
        return body(spec, args.out)
    except Exception as exc:
        return _fail(args.out, command, spec.to_json(), exc)


def _passive_omp_threads(spec: TrainSpec) -> None:
    """With input workers on the node, OpenMP threads that spin between steps (the
    default) take the cores the workers decode on: a file-fed run on a CPU lets them sleep.
    Read once, when torch loads OpenMP, so it is set before torch is imported."""
    if spec.data.source == "files" and spec.device == "cpu":
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _train_body(spec: TrainSpec, out_dir: Path) -> int:
    _passive_omp_threads(spec)
    if spec.backend == "mpi":  # under mpirun: gradients averaged over mpi4py
        from loadgen.train.mpi_train import train_over_mpi

        train_over_mpi(spec, out_dir)
        return EXIT_OK
    import torch
    import torch.distributed as dist

    from loadgen.train.distributed import describe_device, init_rank, shutdown
    from loadgen.train.loop import train_rank

    ctx = init_rank(spec.device, spec.backend, spec.collective_timeout_s)
    try:
        timings = train_rank(spec, ctx).to_dict()
        gathered: list[Any] = [None] * ctx.world_size
        dist.all_gather_object(gathered, timings)
        if ctx.is_leader:
            record = result.base_record("train", spec.to_json(), "ok", "")
            record.update(result.training_totals(gathered))
            record.update(
                world_size=ctx.world_size,
                backend=ctx.backend,
                device=describe_device(ctx.device),
                settings={
                    "model": spec.model,
                    "image_size": spec.image_size,
                    "per_rank_batch": spec.batch_size,
                    "precision": spec.precision,
                    "warmup_steps": spec.warmup_steps,
                    "measured_steps": spec.measured_steps,
                    "torch_version": torch.__version__,
                    "intra_op_threads": spec.threads or torch.get_num_threads(),
                    "nodes": len({t["node_rank"] for t in gathered}),
                    "data_source": spec.data.source,
                    "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "default"),
                },
                timed_start_unix=min(t["timed_start_unix"] for t in gathered),
                timed_end_unix=max(t["timed_end_unix"] for t in gathered),
            )
            result.write_record(out_dir, record)
    finally:
        shutdown()
    return EXIT_OK


def _allreduce_body(spec: AllreduceSpec, out_dir: Path) -> int:
    import torch
    import torch.distributed as dist

    from loadgen.train.allreduce import bandwidth_note, bandwidth_rows, probe_rank
    from loadgen.train.distributed import describe_device, init_rank, shutdown

    ctx = init_rank(spec.device, spec.backend, spec.collective_timeout_s)
    try:
        seconds = probe_rank(spec, ctx)
        gathered: list[Any] = [None] * ctx.world_size
        dist.all_gather_object(
            gathered, {"host": ctx.host, "node_rank": ctx.node_rank, "seconds": seconds}
        )
        if ctx.is_leader:
            record = result.base_record("allreduce", spec.to_json(), "ok", "")
            record.update(
                world_size=ctx.world_size,
                backend=ctx.backend,
                device=describe_device(ctx.device),
                nodes=len({g["node_rank"] for g in gathered}),
                torch_version=torch.__version__,
                rows=bandwidth_rows(spec.sizes_bytes, [g["seconds"] for g in gathered],
                                    ctx.world_size),
                busbw_note=bandwidth_note(ctx.world_size),
            )
            result.write_record(out_dir, record)
    finally:
        shutdown()
    return EXIT_OK


def _mpi_probe_body(spec: MpiProbeSpec, out_dir: Path) -> int:
    from loadgen.train.mpi_probe import probe_record, probe_rows
    from loadgen.train.mpi_world import join_world

    world = join_world()
    rows = probe_rows(world, spec)
    node_ranks = world.comm.allgather(world.node_rank)
    if world.is_leader:
        record = result.base_record("mpiprobe", spec.to_json(), "ok", "")
        record.update(probe_record(world, spec, rows, node_ranks))
        result.write_record(out_dir, record)
    return EXIT_OK


def mpi_probe_main(argv: Sequence[str] | None = None) -> int:
    return _run(argv, "mpiprobe", "OSU-style MPI latency and bandwidth probe (one rank).",
                load_mpi_probe_spec, _mpi_probe_body)


def train_main(argv: Sequence[str] | None = None) -> int:
    return _run(argv, "train", "Synthetic-data DDP training benchmark (one rank).",
                load_train_spec, _train_body)


def allreduce_main(argv: Sequence[str] | None = None) -> int:
    return _run(argv, "allreduce", "Allreduce bus-bandwidth probe (one rank).",
                load_allreduce_spec, _allreduce_body)

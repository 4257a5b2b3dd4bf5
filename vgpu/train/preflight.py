"""Checks made before any rank starts: enough nodes, enough GPUs per node, a batch that
fits in memory, and a node-side harness that imports torch and accepts the spec. Each
failure is an InputError naming the scenario file, the field and the fix."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from loadgen.contract import TrainRunSpec
from vgpu.errors import InputError, PlanError, Problem
from vgpu.train.launch import SPEC_FILE, Launch, TrainNode, run_bash, stage_spec
from vgpu.train.memory import estimate_training_memory

GIB = float(1 << 30)


def select_nodes(
    available: Sequence[TrainNode], requested: int, source: str, field: str
) -> list[TrainNode]:
    if requested > len(available):
        names = ", ".join(node.name for node in available) or "none"
        raise PlanError.single(
            source, field,
            f"{requested} nodes requested but the inventory gives {len(available)} ({names})",
            fix=f"lower '{field.rsplit('.', 1)[-1]}' to {len(available)} or add targets",
        )
    return list(available[:requested])


def check_gpus(nodes: Sequence[TrainNode], gpus_per_node: int, source: str, field: str) -> None:
    short = [node for node in nodes if node.gpus < gpus_per_node]
    if short:
        listing = ", ".join(f"{node.name} has {node.gpus}" for node in short)
        raise PlanError.single(
            source, field, f"{gpus_per_node} GPU(s) per node requested but {listing}",
            fix="lower gpus_per_node or give each node more GPUs",
        )


def check_memory(
    nodes: Sequence[TrainNode], spec: TrainRunSpec, ranks_per_node: int, on_gpu: bool,
    source: str, field: str,
) -> None:
    """On GPUs each rank has its own GPU memory; on CPU the node's ranks share host memory."""
    estimate = estimate_training_memory(
        spec.model, spec.image_size, spec.batch_size, spec.precision, on_gpu
    )
    sharers = 1 if on_gpu else ranks_per_node
    problems: list[Problem] = []
    for node in nodes:
        if node.memory_bytes is None:
            continue
        available = node.memory_bytes / sharers
        if estimate.total_bytes > available:
            where = "GPU" if on_gpu else f"host ({sharers} ranks share it)"
            problems.append(Problem(
                file=source, field=field,
                message=(
                    f"batch {estimate.batch} of {spec.model} at {spec.image_size}px "
                    f"{spec.precision} needs about {estimate.total_bytes / GIB:.1f} GiB per "
                    f"rank but {node.name} has {available / GIB:.1f} GiB of {where} memory"
                ),
                fix=f"use a batch of at most {estimate.largest_batch(available)}",
            ))
    if problems:
        raise InputError(problems)


def _check_node(node: TrainNode, command: str, source: str) -> Problem | None:
    python = shlex.quote(node.python)
    env = " ".join(f"{key}={shlex.quote(value)}" for key, value in sorted(node.env.items()))
    prefix = f"env {env} " if env else ""
    check = (
        f"cd {shlex.quote(node.workdir)} && {prefix}{python} -c 'import torch' && "
        f"{prefix}{python} -m loadgen.train {command} {shlex.quote(SPEC_FILE)} --check"
    )
    done = run_bash(node, check, timeout=120)
    if done.exit_code == 0:
        return None
    detail = (done.stderr or done.stdout).strip().splitlines()
    last = detail[-1] if detail else f"exit code {done.exit_code}"
    if "No module named 'torch'" in last:
        return Problem(
            file=source, field=f"node {node.name}",
            message=f"torch is missing for {node.python} on {node.name}",
            fix="install vgpu with the train extra there (pip install 'vgpu[train]')",
        )
    if "No module named" in last or "No such file" in last:
        return Problem(
            file=source, field=f"node {node.name}",
            message=f"{node.python} cannot run the training harness: {last}",
            fix="install vgpu with the train extra there (pip install 'vgpu[train]')",
        )
    return Problem(file=source, field=f"node {node.name}",
                   message=f"the harness rejected the training spec: {last}",
                   fix="correct the workload settings")


def check_nodes_ready(launch: Launch, source: str) -> None:
    """Stages the spec on every node and has the node's harness validate it (which also
    proves that torch imports there)."""
    for node in launch.nodes:
        stage_spec(node, launch.spec)
    with ThreadPoolExecutor(max_workers=len(launch.nodes)) as pool:
        results = list(pool.map(lambda n: _check_node(n, launch.command, source), launch.nodes))
    problems = [problem for problem in results if problem is not None]
    if problems:
        raise InputError(problems)

"""How an MPI training job sits on its nodes: ranks per node and threads per rank from the
scenario, the node's cores, and a warning when the two oversubscribe them.

The Zenith scaling study (Horovod over MPI) found OMP_NUM_THREADS x ranks per node = cores
worth 79x at 100 nodes: threads beyond the cores contend, and every allreduce then waits
for the slowest of them."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from vgpu.errors import RemoteError
from vgpu.model.scenario import Scenario, TrainingWorkload
from vgpu.train.launch import Launch, TrainNode, run_bash
from vgpu.train.mpirun import MpiJob
from vgpu.train.network import network_options

log = logging.getLogger(__name__)


def ranks_per_node(workload: TrainingWorkload) -> int:
    return workload.ranks_per_node or workload.gpus_per_node


def node_cores(node: TrainNode) -> int:
    done = run_bash(node, "nproc", timeout=60)
    if done.exit_code != 0 or not done.stdout.strip().isdigit():
        raise RemoteError(f"{node.name}: nproc failed (exit {done.exit_code}): "
                          f"{done.stderr.strip()[:300]}")
    return int(done.stdout.strip())


def threads_per_rank(requested: int | None, ranks: int, cores: int) -> int:
    """The scenario's threads, else the node's cores shared out among its ranks."""
    return requested if requested is not None else max(1, cores // ranks)


def oversubscription(node: str, ranks: int, threads: int, cores: int) -> str | None:
    """The warning for threads x ranks above the node's cores; None when they fit."""
    if ranks * threads <= cores:
        return None
    return (f"{node}: {ranks} ranks x {threads} threads = {ranks * threads} threads on "
            f"{cores} cores: they contend for the cores and every allreduce waits for the "
            f"slowest rank (set threads_per_rank to {max(1, cores // ranks)}, or fewer "
            "ranks_per_node: OMP_NUM_THREADS x ranks per node = cores)")


def plan_threads(workload: TrainingWorkload, nodes: Sequence[TrainNode], ranks: int,
                 notes: list[str]) -> int:
    """Threads per rank for the job (the fewest cores decide the default); every node that
    would be oversubscribed is warned of, in the log and in the run's notes."""
    cores = {node.name: node_cores(node) for node in nodes}
    threads = threads_per_rank(workload.threads_per_rank, ranks, min(cores.values()))
    for name, count in cores.items():
        warning = oversubscription(name, ranks, threads, count)
        if warning is not None:
            log.warning("%s", warning)
            notes.append(f"warning: {warning}")
    notes.append(f"mpi: {ranks} rank(s) per node x {threads} thread(s) per rank")
    return threads


def mpi_training_job(scenario: Scenario, workload: TrainingWorkload, launch: Launch,
                     remote: bool, notes: list[str]) -> MpiJob:
    """The prepared training launch as an mpirun job (its spec carries the threads)."""
    version = run_bash(launch.nodes[0], "mpirun --version", timeout=60)
    if version.exit_code != 0:
        raise RemoteError(f"{launch.nodes[0].name}: comm_backend mpi needs Open MPI, but "
                          f"`mpirun --version` failed (exit {version.exit_code}): install "
                          "openmpi-bin and mpi4py (vgpu provision does for an mpi scenario)")
    threads = plan_threads(workload, launch.nodes, launch.procs_per_node, notes)
    interface = network_options(scenario.network, workload.network).interface if remote \
        else None
    spec = {**launch.spec, "threads": threads}
    return MpiJob(nodes=launch.nodes, ranks_per_node=launch.procs_per_node, command="train",
                  spec=spec, threads_per_rank=threads, interface=interface,
                  env=dict(workload.network.env) if remote else {},
                  timeout_s=launch.timeout_s)

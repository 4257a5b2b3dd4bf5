"""Run a scenario's training workloads: pick device and backend, build the harness spec,
check everything before launch, run torchrun on every node and store the result.

``vgpu bench`` calls :func:`run_training_scenario`. Without targets the workload runs on
this machine as ``nodes x gpus_per_node`` ranks of one torchrun (on its GPUs when there are
enough, else on the CPU with Gloo, which every record says)."""

from __future__ import annotations

import os
import shlex
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from loadgen.contract import DATASET_MANIFEST, TRAINING_MODELS, TrainingDataSpec, TrainRunSpec
from vgpu.errors import InputError, RemoteError
from vgpu.model.load import vgpu_requests
from vgpu.model.scenario import Scenario, TrainingWorkload
from vgpu.remote.local import LocalTransport
from vgpu.results.store.records import RunStart, TargetKind
from vgpu.results.store.result_store import ResultStore
from vgpu.train import preflight
from vgpu.train.launch import Launch, TrainNode, run_launch
from vgpu.train.mpi_plan import mpi_training_job, ranks_per_node
from vgpu.train.mpirun import MpiJob, run_mpi_job
from vgpu.train.netenv import NetworkOptions, comm_environment, port_mapping_environment
from vgpu.train.network import network_options, training_platform
from vgpu.train.portmap import hca_ports
from vgpu.train.records import store_training_record
from vgpu.train.storage import Storage, local_storage, node_storage


@dataclass(frozen=True)
class Overrides:
    """Smaller settings for a CPU functional run (a CPU run is a check, not a figure)."""

    batch_per_gpu: int | None = None
    image_size: int | None = None
    model: str | None = None
    steps: int | None = None
    warmup_steps: int | None = None


@dataclass(frozen=True)
class TrainingRun:
    workload: str
    record: dict[str, Any]
    out_dir: Path
    run_id: int | None
    notes: list[str] = field(default_factory=list)


def local_gpu_count() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _host_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None


def local_node(workdir: Path, python: str = sys.executable) -> TrainNode:
    gpus = local_gpu_count()
    memory: int | None
    if gpus:
        import torch

        memory = min(torch.cuda.get_device_properties(i).total_memory for i in range(gpus))
    else:
        memory = _host_memory_bytes()
    return TrainNode(
        name="localhost", shell=LocalTransport(), address="127.0.0.1",
        workdir=str(workdir.resolve()),
        python=python, gpus=gpus, memory_bytes=memory,
    )


def _data_spec(workload: TrainingWorkload, local: bool, procs: int, source: str,
               where: str, notes: list[str]) -> TrainingDataSpec:
    """The harness's data section: for files, the dataset's path (on this machine, the
    scenario's when it holds a dataset here, else one made in vgpu's cache) and the
    workers each rank starts (on this machine, no more than its cores allow)."""
    data = workload.data
    if data.source == "synthetic":
        return TrainingDataSpec()
    path, workers = data.path, data.workers
    if local:
        path = local_dataset(workload, notes)
        fitting = max(1, (os.cpu_count() or 1) // procs)
        if workers > fitting:
            notes.append(f"data.workers {workers} lowered to {fitting} per rank: "
                         f"{procs} rank(s) share this machine's {os.cpu_count()} cores")
            workers = fitting
    elif path is None:
        raise InputError.single(
            source, f"{where}.data.path", "source files on the nodes needs the dataset's "
            "folder (or URL) there", fix="make it on the nodes' storage with `vgpu data "
            "make DIR` and set data.path to DIR")
    return TrainingDataSpec(source="files", path=path, workers=workers, cache=data.cache)


def local_dataset(workload: TrainingWorkload, notes: list[str]) -> str:
    """The dataset a run on this machine reads (imported here: Pillow is needed only to
    make one)."""
    from vgpu.datasets.store import ensure_dataset, read_manifest

    data = workload.data
    if data.path is not None and (Path(data.path) / DATASET_MANIFEST).is_file():
        manifest = read_manifest(Path(data.path))
        notes.append(f"dataset: {data.path} ({manifest.total_images} images, "
                     f"{manifest.total_bytes / 1e6:.0f} MB)")
        return data.path
    folder, manifest, made = ensure_dataset(data.images, data.size, data.copies)
    where = f"{data.path} holds no dataset here, so " if data.path else ""
    notes.append(f"dataset: {where}{'made' if made else 'reused'} {folder} "
                 f"({manifest.total_images} {data.size} images, "
                 f"{manifest.total_bytes / 1e6:.0f} MB)")
    return str(folder)


def _harness_spec(
    workload: TrainingWorkload, device: str, backend: str, precision: str, over: Overrides,
    source: str, where: str, data: TrainingDataSpec,
) -> TrainRunSpec:
    model = over.model or workload.model
    if model not in TRAINING_MODELS:
        raise InputError.single(
            source, f"{where}.model", f"training model '{model}' is not available",
            fix=f"use one of {', '.join(TRAINING_MODELS)}",
        )
    on_gpu = device == "gpu"
    steps = workload.steps if on_gpu else workload.cpu_steps
    return TrainRunSpec(
        model=model,
        image_size=over.image_size or workload.image_size,
        batch_size=over.batch_per_gpu or workload.batch_per_gpu,
        precision=precision,
        backend=backend,
        device=device,
        warmup_steps=workload.warmup_steps if over.warmup_steps is None else over.warmup_steps,
        measured_steps=over.steps or steps,
        instance_name=workload.label,
        data=data,
    )


def _device_plan(
    workload: TrainingWorkload, nodes: Sequence[TrainNode], notes: list[str]
) -> tuple[str, str, str]:
    """device, backend, precision actually used, with a note for every change."""
    mpi = workload.comm_backend == "mpi"
    if not mpi and all(node.gpus >= workload.gpus_per_node for node in nodes):
        return "gpu", workload.comm_backend, workload.precision
    device, backend, precision = "cpu", workload.comm_backend, workload.precision
    notes.append("CPU: no GPU/MIG slice used (" + ("comm_backend mpi reduces CPU tensors"
                 if mpi else "not enough GPUs on the nodes") + ")")
    if backend == "nccl":
        backend = "gloo"
        notes.append("comm_backend nccl needs GPUs: gloo used on CPU")
    if precision == "fp16":
        precision = "bf16"
        notes.append("fp16 autocast needs a GPU: bf16 autocast used on CPU")
    return device, backend, precision


def _port_mapped(nodes: list[TrainNode], network: NetworkOptions) -> list[TrainNode]:
    """Each node's HCA ports from its own ibdev2netdev, pinned for NCCL on that node."""
    wanted = network.interface or "any interface with its link up"
    mapped: list[TrainNode] = []
    for node in nodes:
        done = node.shell.run("ibdev2netdev", timeout=60)
        ports = hca_ports(done.stdout, network.interface) if done.exit_code == 0 else []
        if not ports:
            raise RemoteError(
                f"{node.name}: ibdev2netdev shows no HCA port for {wanted} "
                f"(exit {done.exit_code}: {(done.stderr or done.stdout).strip()[:300]})"
            )
        mapped.append(replace(node, env={**node.env, **port_mapping_environment(ports)}))
    return mapped


def planned_gpu_memory_bytes(scenario: Scenario) -> int:
    """The smallest framebuffer a rank gets in the scenario's plan (a MIG slice's or a whole
    GPU's), in nominal bytes (10 GB = 1e10 B, below the real 9.5+ GiB: conservative)."""
    sizes = [request.framebuffer_gb for requests in vgpu_requests(scenario).values()
             for request in requests]
    return min(sizes, default=scenario.gpu_model.memory_gb) * 10**9


def prepare_launch(
    scenario: Scenario, index: int, workload: TrainingWorkload,
    targets: Sequence[TrainNode] | None, workdir: Path, over: Overrides, notes: list[str],
) -> Launch:
    """Everything checked, nothing started: the Launch for one training workload."""
    source = scenario.source or f"scenario {scenario.id}"
    where = f"workloads[{index}]"
    per_node = ranks_per_node(workload) if workload.comm_backend == "mpi" \
        else workload.gpus_per_node
    if targets is None:
        nodes = [local_node(workdir)]
        procs = workload.nodes * per_node
        runner = "mpirun" if workload.comm_backend == "mpi" else "torchrun"
        notes.append(f"local: {workload.nodes} node(s) x {per_node} run as "
                     f"{procs} ranks of one {runner} on this machine")
        device, backend, precision = _device_plan(
            workload.model_copy(update={"gpus_per_node": procs}), nodes, notes)
    else:
        nodes = preflight.select_nodes(targets, workload.nodes, source, f"{where}.nodes")
        procs = per_node
        device, backend, precision = _device_plan(workload, nodes, notes)
    data = _data_spec(workload, targets is None, procs, source, where, notes)
    spec = _harness_spec(workload, device, backend, precision, over, source, where, data)
    if device == "gpu":
        preflight.check_gpus(nodes, procs, source, f"{where}.gpus_per_node")
        planned = planned_gpu_memory_bytes(scenario)
        nodes = [node if node.memory_bytes is not None else replace(node, memory_bytes=planned)
                 for node in nodes]
    preflight.check_memory(nodes, spec, procs, device == "gpu", source,
                           f"{where}.batch_per_gpu")
    net = workload.network
    options = network_options(scenario.network, net)
    comm_env = comm_environment(options, backend)
    if targets is None:
        if comm_env or net.port_mapping:
            notes.append("network settings are for traffic between nodes: not applied to "
                         "ranks on this machine")
        comm_env = {}
    elif backend == "nccl" and net.port_mapping:
        nodes = _port_mapped(nodes, options)
    elif net.port_mapping:
        notes.append("port_mapping applies to NCCL over InfiniBand/RoCE: ignored with gloo")
    launch = Launch(
        nodes=nodes, procs_per_node=procs, command="train", spec=spec.to_json(),
        master_port=net.master_port, comm_env=comm_env,
    )
    preflight.check_nodes_ready(launch, source)
    return launch


def run_training_scenario(
    scenario: Scenario,
    targets: Sequence[TrainNode] | None,
    out_dir: Path,
    *,
    store: ResultStore | None = None,
    series_id: str | None = None,
    repeat_index: int = 0,
    target_kind: TargetKind = "local",
    overrides: Overrides | None = None,
    workloads: Sequence[str] | None = None,
) -> list[TrainingRun]:
    """Runs every training workload of ``scenario`` (or those named) once; stores each
    when given a store."""
    over = overrides or Overrides()
    series = series_id or uuid.uuid4().hex[:12]
    runs: list[TrainingRun] = []
    for index, workload in enumerate(scenario.workloads):
        if not isinstance(workload, TrainingWorkload):
            continue
        if workloads is not None and workload.label not in workloads:
            continue
        notes: list[str] = []
        work_out = out_dir / workload.label
        node_work = work_out / "node" if targets is None else None
        launch = prepare_launch(scenario, index, workload, targets,
                                node_work or work_out, over, notes)
        job = None
        if launch.spec["backend"] == "mpi":
            job = mpi_training_job(scenario, workload, launch, targets is not None, notes)
            outcome = run_mpi_job(job, work_out)
        else:
            outcome = run_launch(launch, work_out)
        if crashed := outcome.record.get("relaunched_after"):
            launches = int(outcome.record.get("launches", 2))
            notes.append(f"warning: started {launches} times: the first launch failed "
                         f"before any result ({crashed[:300]})")
        record = {**outcome.record, "notes": notes}
        run_id = None
        if store is not None:
            start = RunStart(
                series_id=series, scenario_id=scenario.id, scenario_name=scenario.name,
                workload=workload.label, target_kind=target_kind, repeat_index=repeat_index,
                kind="training", scenario_file=scenario.source,
                workload_detail=_workload_detail(workload, launch, job),
                platform=training_platform(scenario, targets, _storage(launch, targets)),
            )
            run_id = store_training_record(store, start, record, str(work_out))
        runs.append(TrainingRun(workload.label, record, work_out, run_id, notes))
    return runs


def _storage(launch: Launch, targets: Sequence[TrainNode] | None) -> Storage | None:
    path = launch.spec["data"]["path"]
    if launch.spec["data"]["source"] != "files" or path is None:
        return None
    return local_storage(path) if targets is None else node_storage(launch.nodes[0], path)


def _workload_detail(workload: TrainingWorkload, launch: Launch,
                     job: MpiJob | None = None) -> dict[str, Any]:
    spec = launch.spec
    data = spec["data"]
    fed = {"data_source": "files", "data_path": data["path"]} \
        if data["source"] == "files" else {}
    return {
        **fed,
        "workload_name": workload.label,
        "nodes": workload.nodes,
        "gpus_per_node": workload.gpus_per_node,
        "world_size": len(launch.nodes) * launch.procs_per_node,
        "model": spec["model"],
        "image_size": spec["image_size"],
        "batch_per_gpu": spec["batch_size"],
        "precision": spec["precision"],
        "backend": spec["backend"],
        "device": spec["device"],
        "comm_env": " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(launch.comm_env.items())),
        **({} if job is None else {"ranks_per_node": job.ranks_per_node,
                                   "threads_per_rank": job.threads_per_rank}),
    }

"""Training and allreduce-probe specs: JSON in, validated in full before any work is done.

The types and names are the contract's (loadgen.contract). Every problem names the spec
file, the field and the fix; all of them are raised together as one SpecError, which the
command line turns into exit code 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loadgen.contract import (
    ALLREDUCE_DTYPE_BYTES,
    ALLREDUCE_DTYPES,
    TRAINING_BACKENDS,
    TRAINING_DATA_CACHE,
    TRAINING_DATA_SOURCES,
    TRAINING_DEVICE_KINDS,
    TRAINING_MODELS,
    TRAINING_PRECISIONS,
    TRAINING_SCHEMA_VERSION,
    AllreduceRunSpec,
    MpiProbeRunSpec,
    TrainingDataSpec,
    TrainRunSpec,
)
from loadgen.errors import SpecError
from loadgen.specreader import SpecReader, load_json, require_object

TrainSpec = TrainRunSpec
AllreduceSpec = AllreduceRunSpec
MpiProbeSpec = MpiProbeRunSpec

__all__ = ["AllreduceSpec", "MpiProbeSpec", "SpecError", "TrainSpec", "load_allreduce_spec",
           "load_mpi_probe_spec", "load_train_spec", "parse_allreduce_spec",
           "parse_mpi_probe_spec", "parse_train_spec"]


def _start(data: Any, source: str, known: set[str]) -> tuple[SpecReader, dict[str, Any]]:
    doc = require_object(data, source)
    reader = SpecReader(source)
    reader.unknown_keys(doc, known)
    reader.schema_version(doc, TRAINING_SCHEMA_VERSION)
    return reader, doc


def _device_backend(r: SpecReader, doc: dict[str, Any], default_device: str,
                    default_backend: str) -> tuple[str, str]:
    device = r.choice(doc, "device", "device", TRAINING_DEVICE_KINDS, default_device)
    backend = r.choice(doc, "backend", "backend", TRAINING_BACKENDS, default_backend)
    if r.clean("device", "backend") and device == "cpu" and backend == "nccl":
        r.problem("backend", "nccl needs GPUs but device is cpu", 'use "gloo" or device "gpu"')
    if r.clean("device", "backend") and device == "gpu" and backend == "mpi":
        r.problem("backend", "mpi reduces CPU tensors (mpi4py over numpy) but device is gpu",
                  'use "nccl" on GPUs or device "cpu"')
    return device, backend


def _precision(r: SpecReader, doc: dict[str, Any], device: str, default: str) -> str:
    precision = r.choice(doc, "precision", "precision", TRAINING_PRECISIONS, default)
    if r.clean("device", "precision") and precision == "fp16" and device == "cpu":
        r.problem("precision", "fp16 autocast needs a GPU", 'use "bf16" or "fp32" on cpu')
    return precision


def _data(r: SpecReader, doc: dict[str, Any]) -> TrainingDataSpec:
    d = TrainingDataSpec()
    section = r.section(doc, "data", set(d.to_json()))
    source = r.choice(section, "source", "data.source", TRAINING_DATA_SOURCES, d.source)
    path = r.text(section, "path", "data.path")
    if r.clean("data.source", "data.path") and source == "files" and path is None:
        r.problem("data.path", "source files needs the dataset's folder or URL",
                  "set data.path to a folder made by `vgpu data make` (or an http URL)")
    return TrainingDataSpec(
        source=source,
        path=path,
        workers=r.count(section, "workers", "data.workers", d.workers, 1),
        cache=r.choice(section, "cache", "data.cache", TRAINING_DATA_CACHE, d.cache),
    )


def parse_train_spec(data: Any, source: str = "<spec>") -> TrainSpec:
    """Validate a decoded JSON document; raise SpecError listing every problem."""
    d = TrainSpec()
    r, doc = _start(data, source, set(d.to_json()))
    device, backend = _device_backend(r, doc, d.device, d.backend)
    spec = TrainSpec(
        model=r.choice(doc, "model", "model", TRAINING_MODELS, d.model),
        image_size=r.count(doc, "image_size", "image_size", d.image_size, 8),
        batch_size=r.count(doc, "batch_size", "batch_size", d.batch_size, 1),
        precision=_precision(r, doc, device, d.precision),
        backend=backend,
        device=device,
        warmup_steps=r.count(doc, "warmup_steps", "warmup_steps", d.warmup_steps, 0),
        measured_steps=r.count(doc, "measured_steps", "measured_steps", d.measured_steps, 1),
        comm_probe_steps=r.count(doc, "comm_probe_steps", "comm_probe_steps",
                                 d.comm_probe_steps, 0),
        learning_rate=r.number(doc, "learning_rate", "learning_rate", d.learning_rate),
        threads=r.integer(doc, "threads", "threads", None, 1),
        seed=r.count(doc, "seed", "seed", d.seed, 0),
        collective_timeout_s=r.number(doc, "collective_timeout_s", "collective_timeout_s",
                                      d.collective_timeout_s),
        instance_name=r.string(doc, "instance_name", "instance_name", d.instance_name),
        data=_data(r, doc),
    )
    r.check()
    return spec


def _sizes(r: SpecReader, doc: dict[str, Any], dtype: str,
           default: tuple[int, ...]) -> tuple[int, ...]:
    sizes = doc.get("sizes_bytes", list(default))
    if not isinstance(sizes, list) or not sizes:
        r.problem("sizes_bytes", "must be a non-empty list of byte counts",
                  "e.g. [1024, 1048576]")
        return default
    element = ALLREDUCE_DTYPE_BYTES[dtype]
    before = len(r.problems)
    for index, size in enumerate(sizes):
        field = f"sizes_bytes[{index}]"
        if isinstance(size, bool) or not isinstance(size, int) or size < element:
            r.problem(field, f"must be an integer >= {element}, got {size!r}",
                      f"use whole byte counts of at least one {dtype} element")
        elif size % element:
            r.problem(field, f"{size} is not a multiple of {element} bytes",
                      f"round it to a multiple of the {dtype} element size")
    return tuple(sizes) if len(r.problems) == before else default


def parse_allreduce_spec(data: Any, source: str = "<spec>") -> AllreduceSpec:
    """Validate a decoded JSON document; raise SpecError listing every problem."""
    d = AllreduceSpec()
    r, doc = _start(data, source, set(d.to_json()))
    device, backend = _device_backend(r, doc, d.device, d.backend)
    dtype = r.choice(doc, "dtype", "dtype", ALLREDUCE_DTYPES, d.dtype)
    if r.clean("backend") and backend == "mpi":
        r.problem("backend", "this probe runs torch.distributed, which has no MPI backend "
                  "here", "probe MPI with the mpiprobe command (its own spec)")
    spec = AllreduceSpec(
        sizes_bytes=_sizes(r, doc, dtype, d.sizes_bytes),
        iterations=r.count(doc, "iterations", "iterations", d.iterations, 1),
        warmup_iterations=r.count(doc, "warmup_iterations", "warmup_iterations",
                                  d.warmup_iterations, 0),
        backend=backend,
        device=device,
        dtype=dtype,
        collective_timeout_s=r.number(doc, "collective_timeout_s", "collective_timeout_s",
                                      d.collective_timeout_s),
        instance_name=r.string(doc, "instance_name", "instance_name", d.instance_name),
    )
    r.check()
    return spec


def _byte_sizes(r: SpecReader, doc: dict[str, Any], default: tuple[int, ...]) -> tuple[int, ...]:
    sizes = doc.get("sizes_bytes", list(default))
    if not isinstance(sizes, list) or not sizes:
        r.problem("sizes_bytes", "must be a non-empty list of byte counts", "e.g. [1, 1024]")
        return default
    before = len(r.problems)
    for index, size in enumerate(sizes):
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            r.problem(f"sizes_bytes[{index}]", f"must be an integer >= 1, got {size!r}",
                      "use whole byte counts")
    return tuple(sizes) if len(r.problems) == before else default


def parse_mpi_probe_spec(data: Any, source: str = "<spec>") -> MpiProbeSpec:
    """Validate a decoded JSON document; raise SpecError listing every problem."""
    d = MpiProbeSpec()
    r, doc = _start(data, source, set(d.to_json()))
    spec = MpiProbeSpec(
        sizes_bytes=_byte_sizes(r, doc, d.sizes_bytes),
        iterations=r.count(doc, "iterations", "iterations", d.iterations, 1),
        large_iterations=r.count(doc, "large_iterations", "large_iterations",
                                 d.large_iterations, 1),
        warmup_iterations=r.count(doc, "warmup_iterations", "warmup_iterations",
                                  d.warmup_iterations, 0),
        window=r.count(doc, "window", "window", d.window, 1),
        instance_name=r.string(doc, "instance_name", "instance_name", d.instance_name),
    )
    r.check()
    return spec


def load_mpi_probe_spec(path: Path) -> MpiProbeSpec:
    return parse_mpi_probe_spec(load_json(path), str(path))


def load_train_spec(path: Path) -> TrainSpec:
    return parse_train_spec(load_json(path), str(path))


def load_allreduce_spec(path: Path) -> AllreduceSpec:
    return parse_allreduce_spec(load_json(path), str(path))

"""Training and allreduce-probe specs: JSON in, validated before any work is done.

Plain dataclasses (the harness has no pydantic); every problem names the spec file, the
field and the fix, and the command line turns it into exit code 2.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from loadgen.train.models import RESNET_SHAPES

SCHEMA_VERSION = 1
PRECISIONS = ("fp32", "fp16", "bf16")
BACKENDS = ("auto", "nccl", "gloo")
DEVICE_KINDS = ("cpu", "gpu")


class TrainSpecError(ValueError):
    """A spec that cannot be run; the message names file, field and fix."""

    def __init__(self, source: str, field_path: str, message: str, fix: str) -> None:
        self.source = source
        self.field_path = field_path
        super().__init__(f"{source} {field_path}: {message} (fix: {fix})")


@dataclass(frozen=True)
class TrainSpec:
    model: str = "resnet50"
    image_size: int = 224
    batch_size: int = 32
    precision: str = "fp32"
    backend: str = "auto"
    device: str = "cpu"
    warmup_steps: int = 3
    measured_steps: int = 10
    comm_probe_steps: int = 3
    learning_rate: float = 0.01
    threads: int | None = None
    seed: int = 0
    collective_timeout_s: float = 300.0
    instance_name: str = ""
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class AllreduceSpec:
    sizes_bytes: tuple[int, ...] = field(
        default=(1 << 10, 1 << 14, 1 << 18, 1 << 20, 1 << 22, 1 << 24, 1 << 26)
    )
    iterations: int = 20
    warmup_iterations: int = 5
    backend: str = "auto"
    device: str = "cpu"
    dtype: str = "float32"
    collective_timeout_s: float = 300.0
    instance_name: str = ""
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["sizes_bytes"] = list(self.sizes_bytes)
        return data


class _Reader:
    """Reads typed fields from one JSON object and records where each came from."""

    def __init__(self, source: str, data: dict[str, Any], known: set[str]) -> None:
        self.source = source
        self.data = data
        unknown = sorted(set(data) - known)
        if unknown:
            self.fail(unknown[0], "unknown field", f"remove it; known fields: {sorted(known)}")

    def fail(self, field_path: str, message: str, fix: str) -> None:
        raise TrainSpecError(self.source, field_path, message, fix)

    def integer(self, name: str, default: int, minimum: int) -> int:
        value = self.data.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(
                name, f"must be an integer, got {value!r}", f"write a whole number >= {minimum}"
            )
        if value < minimum:
            self.fail(name, f"must be >= {minimum}, got {value}", f"use a value >= {minimum}")
        return int(value)

    def number(self, name: str, default: float, minimum_exclusive: float) -> float:
        value = self.data.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.fail(name, f"must be a number, got {value!r}", "write a positive number")
        if value <= minimum_exclusive:
            self.fail(name, f"must be > {minimum_exclusive}, got {value}", "use a positive number")
        return float(value)

    def choice(self, name: str, default: str, choices: tuple[str, ...]) -> str:
        value = self.data.get(name, default)
        if value not in choices:
            self.fail(
                name, f"{value!r} is not one of {list(choices)}", f"use one of {list(choices)}"
            )
        return str(value)

    def text(self, name: str, default: str) -> str:
        value = self.data.get(name, default)
        if not isinstance(value, str):
            self.fail(name, f"must be a string, got {value!r}", "write a quoted string")
        return str(value)


def _read_json(path: Path) -> dict[str, Any]:
    source = str(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise TrainSpecError(
            source, "(file)", "does not exist", "pass the path of a spec JSON"
        ) from None
    except json.JSONDecodeError as exc:
        raise TrainSpecError(
            source, "(file)", f"is not valid JSON: {exc.msg} at line {exc.lineno}", "fix the JSON"
        ) from exc
    if not isinstance(data, dict):
        raise TrainSpecError(source, "(file)", "must hold a JSON object", "wrap the fields in {}")
    return data


def _check_version(source: str, data: dict[str, Any]) -> None:
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise TrainSpecError(
            source, "schema_version", f"must be {SCHEMA_VERSION}, got {version!r}",
            f'write "schema_version": {SCHEMA_VERSION}',
        )


def _check_device_backend(reader: _Reader, device: str, backend: str) -> None:
    if device == "cpu" and backend == "nccl":
        reader.fail("backend", "nccl needs GPUs but device is cpu", 'use "gloo" or device "gpu"')


def parse_train_spec(data: dict[str, Any], source: str = "<spec>") -> TrainSpec:
    _check_version(source, data)
    defaults = TrainSpec()
    reader = _Reader(source, data, set(defaults.to_dict()))
    model = reader.choice("model", defaults.model, tuple(RESNET_SHAPES))
    device = reader.choice("device", defaults.device, DEVICE_KINDS)
    backend = reader.choice("backend", defaults.backend, BACKENDS)
    _check_device_backend(reader, device, backend)
    precision = reader.choice("precision", defaults.precision, PRECISIONS)
    if precision == "fp16" and device == "cpu":
        reader.fail("precision", "fp16 autocast needs a GPU", 'use "bf16" or "fp32" on cpu')
    threads = data.get("threads")
    if threads is not None:
        threads = reader.integer("threads", 1, 1)
    return TrainSpec(
        model=model,
        image_size=reader.integer("image_size", defaults.image_size, 8),
        batch_size=reader.integer("batch_size", defaults.batch_size, 1),
        precision=precision,
        backend=backend,
        device=device,
        warmup_steps=reader.integer("warmup_steps", defaults.warmup_steps, 0),
        measured_steps=reader.integer("measured_steps", defaults.measured_steps, 1),
        comm_probe_steps=reader.integer("comm_probe_steps", defaults.comm_probe_steps, 0),
        learning_rate=reader.number("learning_rate", defaults.learning_rate, 0.0),
        threads=threads,
        seed=reader.integer("seed", defaults.seed, 0),
        collective_timeout_s=reader.number(
            "collective_timeout_s", defaults.collective_timeout_s, 0.0
        ),
        instance_name=reader.text("instance_name", defaults.instance_name),
    )


def parse_allreduce_spec(data: dict[str, Any], source: str = "<spec>") -> AllreduceSpec:
    _check_version(source, data)
    defaults = AllreduceSpec()
    reader = _Reader(source, data, set(defaults.to_dict()))
    device = reader.choice("device", defaults.device, DEVICE_KINDS)
    backend = reader.choice("backend", defaults.backend, BACKENDS)
    _check_device_backend(reader, device, backend)
    dtype = reader.choice("dtype", defaults.dtype, ("float32", "float16", "bfloat16"))
    element = 4 if dtype == "float32" else 2
    sizes = data.get("sizes_bytes", list(defaults.sizes_bytes))
    if not isinstance(sizes, list) or not sizes:
        reader.fail(
            "sizes_bytes", "must be a non-empty list of byte counts", "e.g. [1024, 1048576]"
        )
    for index, size in enumerate(sizes):
        if isinstance(size, bool) or not isinstance(size, int) or size < element:
            reader.fail(
                f"sizes_bytes[{index}]", f"must be an integer >= {element}, got {size!r}",
                f"use whole byte counts of at least one {dtype} element",
            )
        if size % element:
            reader.fail(
                f"sizes_bytes[{index}]", f"{size} is not a multiple of {element} bytes",
                f"round it to a multiple of the {dtype} element size",
            )
    return AllreduceSpec(
        sizes_bytes=tuple(sizes),
        iterations=reader.integer("iterations", defaults.iterations, 1),
        warmup_iterations=reader.integer("warmup_iterations", defaults.warmup_iterations, 0),
        backend=backend,
        device=device,
        dtype=dtype,
        collective_timeout_s=reader.number(
            "collective_timeout_s", defaults.collective_timeout_s, 0.0
        ),
        instance_name=reader.text("instance_name", defaults.instance_name),
    )


def load_train_spec(path: Path) -> TrainSpec:
    return parse_train_spec(_read_json(path), str(path))


def load_allreduce_spec(path: Path) -> AllreduceSpec:
    return parse_allreduce_spec(_read_json(path), str(path))

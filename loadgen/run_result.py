"""The harness's result record (result.json, docs/harness.md) as a typed run result, read
by the orchestrator: ``parse_run_result`` checks the fields it reads once, where a record
arrives (a round's collection, the store's read), and ``metrics_of`` names every scalar
metric of one instance.

Standard library only, like the run specs. Every field may be absent: a record written by
an older harness, or the empty record stored for an instance that wrote none, still reads.
A field that is present with the wrong type is refused, naming the field."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# The harness's latency percentiles (latency_ns) and the names the store gives them.
LATENCY_PERCENTILE_NAMES = {"p50": "p50", "p90": "p90", "p95": "p95", "p97": "p97",
                            "p99": "p99", "p99.9": "p99_9", "min": "min", "max": "max",
                            "mean": "mean"}
# Metric names of metrics_of; the units are in METRIC_UNITS (warm-up windows and latency
# percentiles are named by pattern).
THROUGHPUT = "throughput"
OUTPUT_TOKEN_THROUGHPUT = "output_token_throughput"
TTFT = "time_to_first_token"
ITL = "inter_token_latency"
TOKEN_LATENCIES = {f"{TTFT}_p50": (TTFT, "p50"), f"{TTFT}_p99": (TTFT, "p99"),
                   f"{ITL}_p50": (ITL, "p50"), f"{ITL}_p99": (ITL, "p99")}
# Triton's server-side split of a request's time (backend.server_statistics.timed_run).
SERVER_SPLIT = {"queue": "triton_queue_us", "compute_input": "triton_compute_input_us",
                "compute_infer": "triton_compute_infer_us",
                "compute_output": "triton_compute_output_us"}
WARMUP_WINDOW = "warmup_window_{}"
WARMUP_STABLE = "warmup_stable"
WARMUP_SPREAD = "warmup_spread_pct"
LATENCY_NS = "latency_ns_{}"
METRIC_UNITS: dict[str, str] = {
    THROUGHPUT: "samples/s", OUTPUT_TOKEN_THROUGHPUT: "tokens/s",
    **{name: "ms" for name in TOKEN_LATENCIES}, **{name: "us" for name in SERVER_SPLIT.values()},
    WARMUP_STABLE: "", WARMUP_SPREAD: "%",
}


class ResultRecordError(ValueError):
    """A result record whose field has the wrong type; the message names the field."""


def _at(record: Mapping[str, Any], path: str) -> Any:
    """The value at ``path`` (keys joined by /); None where a part is absent."""
    value: Any = record
    keys = path.split("/")
    for depth, key in enumerate(keys):
        if value is None:
            return None
        if not isinstance(value, Mapping):
            where = ".".join(keys[:depth])
            raise ResultRecordError(f"{where}: {type(value).__name__} is not an object")
        value = value.get(key)
    return value


def _shown(path: str) -> str:
    return path.replace("/", ".")


def _mapping(record: Mapping[str, Any], path: str) -> Mapping[str, Any]:
    value = _at(record, path)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ResultRecordError(f"{_shown(path)}: {type(value).__name__} is not an object")
    return value


def _number(record: Mapping[str, Any], path: str) -> float | None:
    value = _at(record, path)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ResultRecordError(f"{_shown(path)}: {value!r} is not a number")
    return float(value)


def _text(record: Mapping[str, Any], path: str) -> str | None:
    value = _at(record, path)
    if value is None or isinstance(value, str):
        return value
    raise ResultRecordError(f"{_shown(path)}: {value!r} is not a string")


def _flag(record: Mapping[str, Any], path: str) -> bool | None:
    value = _at(record, path)
    if value is None or isinstance(value, bool):
        return value
    raise ResultRecordError(f"{_shown(path)}: {value!r} is not true or false")


def _numbers(record: Mapping[str, Any], path: str) -> tuple[float, ...]:
    value = _at(record, path)
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise ResultRecordError(f"{_shown(path)}: {type(value).__name__} is not a list")
    for index, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, int | float):
            raise ResultRecordError(f"{_shown(path)}[{index}]: {item!r} is not a number")
    return tuple(float(item) for item in value)


def _percentiles(record: Mapping[str, Any], path: str) -> dict[str, float]:
    """The token latency percentiles metrics_of names (other keys are the views' own)."""
    wanted = {percentile for _, percentile in TOKEN_LATENCIES.values()}
    return {key: number for key in _mapping(record, path) if key in wanted
            and (number := _number(record, f"{path}/{key}")) is not None}


@dataclass(frozen=True)
class Timeline:
    """Completed samples against the wall clock through the timed run (sut.completions)."""

    unix: tuple[float, ...]
    samples: tuple[float, ...]


@dataclass(frozen=True)
class Validity:
    result: str | None  # VALID | INVALID
    reasons: tuple[str, ...] = ()
    min_duration_met: bool | None = None


@dataclass(frozen=True)
class DeviceReport:
    """What the harness ran on, as it saw it."""

    kind: str | None = None
    note: str | None = None
    gpu_name: str | None = None
    mig_profile: str | None = None
    mig_uuid: str | None = None
    execution_provider: str | None = None


@dataclass(frozen=True)
class GpuReport:
    """The GPU's identity from the harness's telemetry (telemetry.gpu)."""

    name: str | None = None
    parent_name: str | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = None


@dataclass(frozen=True)
class Software:
    """The inference runtime's build as the harness reported it (software)."""

    ort_package: str | None = None
    ort_version: str | None = None
    cuda_version: str | None = None
    cudnn_version: str | None = None
    tensorrt_version: str | None = None


@dataclass(frozen=True)
class Stability:
    """The warm-up windows of the stability check (samples/s each) and their verdict."""

    windows_samples_per_s: tuple[float, ...]
    stable: bool
    spread_pct: float | None


@dataclass(frozen=True)
class RunResult:
    """One harness instance's result record, typed. ``raw`` is the record as written: the
    store keeps it, and the parts read by their own views (telemetry, capacity search,
    accuracy, MLPerf rules) stay mappings there."""

    raw: Mapping[str, Any]
    status: str | None = None
    reason: str | None = None
    harness_version: str | None = None
    scenario: str | None = None
    mode: str | None = None
    throughput: float | None = None  # samples/s over the timed run
    latency_ns: dict[str, float] = field(default_factory=dict)  # the store's names
    validity: Validity | None = None
    device: DeviceReport = DeviceReport()
    gpu: GpuReport = GpuReport()
    software: Software = Software()
    timed_start_unix: float | None = None
    timed_end_unix: float | None = None
    completions: Timeline | None = None
    stability: Stability | None = None
    # output token throughput (tokens/s) and TTFT / ITL percentiles (ms) of model llm
    token_throughput: float | None = None
    token_latency_ms: dict[str, dict[str, float]] = field(default_factory=dict)
    server_split_us: dict[str, float] = field(default_factory=dict)  # kind -> mean us
    # The sections their own views read whole; None where the record has none.
    telemetry: Mapping[str, Any] | None = None
    tokens: Mapping[str, Any] | None = None
    capacity: Mapping[str, Any] | None = None
    accuracy: Mapping[str, Any] | None = None
    mlperf_rules: Mapping[str, Any] | None = None
    software_stack: Mapping[str, Any] = field(default_factory=dict)  # the software section
    settings: Mapping[str, Any] = field(default_factory=dict)
    model: Mapping[str, Any] = field(default_factory=dict)

    @property
    def has_tokens(self) -> bool:
        return bool(self.tokens)

    @property
    def host_facts(self) -> Mapping[str, Any]:
        """What the harness read of its machine (telemetry.host): CPU, load, OS."""
        host = (self.telemetry or {}).get("host")
        return host if isinstance(host, Mapping) else {}

    @property
    def failed(self) -> bool:
        return self.status == "failed"


def _validity(record: Mapping[str, Any]) -> Validity | None:
    if not _mapping(record, "validity"):
        return None
    reasons = _at(record, "validity/reasons") or []
    if not isinstance(reasons, list) or not all(isinstance(r, str) for r in reasons):
        raise ResultRecordError(f"validity.reasons: {reasons!r} is not a list of strings")
    return Validity(_text(record, "validity/result"), tuple(reasons),
                    _flag(record, "validity/min_duration_met"))


def _timeline(record: Mapping[str, Any]) -> Timeline | None:
    if not _mapping(record, "sut/completions"):
        return None
    unix = _numbers(record, "sut/completions/unix")
    samples = _numbers(record, "sut/completions/samples")
    if len(unix) != len(samples):
        raise ResultRecordError(f"sut.completions: {len(unix)} times for {len(samples)} "
                                "sample counts")
    return Timeline(unix, samples)


def _stability(record: Mapping[str, Any]) -> Stability | None:
    if not _mapping(record, "stability"):
        return None
    return Stability(_numbers(record, "stability/windows_samples_per_s"),
                     bool(_at(record, "stability/stable")),
                     _number(record, "stability/spread_pct"))


def _optional_mapping(record: Mapping[str, Any], path: str) -> Mapping[str, Any] | None:
    return _mapping(record, path) if _at(record, path) is not None else None


def parse_run_result(record: Mapping[str, Any]) -> RunResult:
    """The typed result of a harness record; raises ResultRecordError naming the first
    field whose value has the wrong type."""
    if not isinstance(record, Mapping):
        raise ResultRecordError(f"the record is a {type(record).__name__}, not an object")
    ort, torch = "software/onnxruntime", "software/torch"
    return RunResult(
        raw=record,
        status=_text(record, "status"),
        reason=_text(record, "reason"),
        harness_version=_text(record, "harness_version"),
        scenario=_text(record, "scenario"),
        mode=_text(record, "mode"),
        throughput=_number(record, "throughput/samples_per_second"),
        latency_ns={ours: value for theirs, ours in LATENCY_PERCENTILE_NAMES.items()
                    if (value := _number(record, f"latency_ns/{theirs}")) is not None},
        validity=_validity(record),
        device=DeviceReport(**{name: _text(record, f"device/{name}") for name in (
            "kind", "note", "gpu_name", "mig_profile", "mig_uuid", "execution_provider")}),
        gpu=GpuReport(**{name: _text(record, f"telemetry/gpu/{name}") for name in (
            "name", "parent_name", "driver_version", "cuda_driver_version")}),
        software=Software(
            ort_package=_text(record, f"{ort}/package"),
            ort_version=_text(record, f"{ort}/version"),
            cuda_version=_version(record, f"{ort}/cuda_version", f"{torch}/cuda"),
            cudnn_version=_version(record, f"{ort}/cudnn_version", f"{torch}/cudnn"),
            tensorrt_version=_version(record, f"{ort}/tensorrt_version")),
        timed_start_unix=_number(record, "timed_start_unix"),
        timed_end_unix=_number(record, "timed_end_unix"),
        completions=_timeline(record),
        stability=_stability(record),
        token_throughput=_number(record, "tokens/output_token_throughput"),
        token_latency_ms={kind: _percentiles(record, f"tokens/{kind}_ms")
                          for kind in (TTFT, ITL) if _mapping(record, f"tokens/{kind}_ms")},
        server_split_us={kind: value for kind in SERVER_SPLIT if (value := _number(
            record, f"backend/server_statistics/timed_run/{kind}/mean_us")) is not None},
        telemetry=_optional_mapping(record, "telemetry"),
        tokens=_optional_mapping(record, "tokens"),
        capacity=_optional_mapping(record, "capacity"),
        accuracy=_optional_mapping(record, "accuracy"),
        mlperf_rules=_optional_mapping(record, "mlperf_rules"),
        software_stack=_mapping(record, "software"),
        settings=_mapping(record, "settings"),
        model=_mapping(record, "model"),
    )


def _version(record: Mapping[str, Any], *paths: str) -> str | None:
    """The first version given: runtimes report them as strings or numbers."""
    for path in paths:
        value = _at(record, path)
        if value not in (None, ""):
            return str(value)
    return None


def metrics_of(result: RunResult) -> dict[str, float]:
    """Every scalar metric of one instance's run, by name (units in METRIC_UNITS; latency
    percentiles as ``latency_ns_<p>``). Offline has no first-token latency worth judging
    (every query arrives at once, so it is the queue's wait): it is left out there."""
    out: dict[str, float] = {}
    if result.throughput is not None:
        out[THROUGHPUT] = result.throughput
    out.update({LATENCY_NS.format(name): value for name, value in result.latency_ns.items()})
    if result.token_throughput is not None:
        out[OUTPUT_TOKEN_THROUGHPUT] = result.token_throughput
    for name, (kind, percentile) in TOKEN_LATENCIES.items():
        if kind == TTFT and result.scenario == "Offline":
            continue
        value = result.token_latency_ms.get(kind, {}).get(percentile)
        if value is not None:
            out[name] = value
    out.update({SERVER_SPLIT[kind]: value for kind, value in result.server_split_us.items()})
    if result.stability is not None:
        out.update({WARMUP_WINDOW.format(n): rate for n, rate in
                    enumerate(result.stability.windows_samples_per_s, start=1)})
        out[WARMUP_STABLE] = 1.0 if result.stability.stable else 0.0
        out[WARMUP_SPREAD] = result.stability.spread_pct or 0.0
    return out


def metric_unit(name: str) -> str:
    if name.startswith(LATENCY_NS.format("")):
        return "ns"
    if name.startswith(WARMUP_WINDOW.format("")):
        return "samples/s"
    return METRIC_UNITS.get(name, "")


EMPTY_RESULT = parse_run_result({})

"""What the harness sampled during the timed run, summed up per instance: GPU utilisation,
memory used, power, SM clock (NVML) and the harness process's CPU, read from the
``telemetry`` of each instance's result.json (docs/harness.md, "Telemetry").

A metric NVML refused is not a zero: on a MIG slice utilisation is Not Supported, and the
summary says so in words instead of a number."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vgpu.results.store.records import InstanceResult
from vgpu.results.views.format import number

MIG_UNSUPPORTED = "not supported on a MIG slice"
PROCESS_CPU = "process_cpu"
NOT_RECORDED = "not recorded"


@dataclass(frozen=True)
class TelemetryField:
    """One summarised quantity: ``key`` names its export columns (``<key>_mean``)."""

    key: str
    label: str
    unit: str
    source: str  # the harness's metric name under telemetry.gpu.metrics, or PROCESS_CPU
    scale: float = 1.0


FIELDS: tuple[TelemetryField, ...] = (
    TelemetryField("gpu_util", "GPU util", "%", "gpu_utilization_percent"),
    TelemetryField("mem_used_mib", "memory used", "MiB", "memory_used_bytes", 1 / 2**20),
    TelemetryField("power_w", "power", "W", "power_w"),
    TelemetryField("sm_clock_mhz", "SM clock", "MHz", "sm_clock_mhz"),
    TelemetryField("process_cpu_pct", "process CPU", "%", PROCESS_CPU),
)
FIELD_BY_KEY = {f.key: f for f in FIELDS}
CSV_COLUMNS: tuple[str, ...] = (
    *(f"{f.key}_{stat}" for f in FIELDS for stat in ("mean", "max")), "telemetry_notes",
)


@dataclass(frozen=True)
class Reading:
    """Mean and max of one field over a timed run, or why there is none (``note``)."""

    mean: float | None = None
    maximum: float | None = None
    note: str | None = None

    @property
    def measured(self) -> bool:
        return self.mean is not None


@dataclass(frozen=True)
class InstanceTelemetry:
    """One instance of one run: a reading per field key, and the sampled time series
    (field key -> [(seconds since the timed start, value)])."""

    run_id: int
    instance: str
    readings: dict[str, Reading]
    series: dict[str, list[tuple[float, float]]]
    duration_s: float | None = None  # of the timed run

    @property
    def recorded(self) -> bool:
        return any(r.measured for r in self.readings.values())


def _without_gpu(telemetry: Mapping[str, Any]) -> str:
    """Why a run has no GPU metrics at all."""
    nvml = telemetry.get("nvml") or {}
    reason = nvml.get("reason")
    return f"no NVML: {reason}" if reason else "no GPU (CPU run)"


def _unsupported_note(gpu: Mapping[str, Any], source: str) -> str | None:
    error = (gpu.get("unsupported") or {}).get(source)
    if error is None:
        return None
    return MIG_UNSUPPORTED if gpu.get("is_mig") else f"not supported: {error}"


def _gpu_reading(telemetry: Mapping[str, Any], field: TelemetryField) -> Reading:
    gpu = telemetry.get("gpu")
    if not isinstance(gpu, Mapping):
        return Reading(note=_without_gpu(telemetry))
    unsupported = _unsupported_note(gpu, field.source)
    if unsupported is not None:
        return Reading(note=unsupported)
    metric = (gpu.get("metrics") or {}).get(field.source) or {}
    if metric.get("mean") is None:
        return Reading(note=NOT_RECORDED)
    return Reading(metric["mean"] * field.scale, metric["max"] * field.scale)


def _process_reading(telemetry: Mapping[str, Any]) -> Reading:
    host = telemetry.get("host") or {}
    mean = host.get("process_cpu_percent_mean")
    if mean is None:
        return Reading(note=NOT_RECORDED)
    return Reading(float(mean), float(host.get("process_cpu_percent_max", mean)))


def _gpu_series(telemetry: Mapping[str, Any]) -> dict[str, list[tuple[float, float]]]:
    gpu = telemetry.get("gpu")
    metrics = (gpu.get("metrics") or {}) if isinstance(gpu, Mapping) else {}
    found = {}
    for field in FIELDS:
        samples = (metrics.get(field.source) or {}).get("samples") or []
        if samples:
            found[field.key] = [(float(t), float(v) * field.scale) for t, v in samples]
    return found


def instance_telemetry(run_id: int, result: InstanceResult) -> InstanceTelemetry:
    """The readings of one stored instance of any kind (``result.result`` is its
    result.json, the harness's or a training rank's: not parsed as the harness's)."""
    telemetry = result.result.get("telemetry")
    duration = None
    if result.timed_start_unix is not None and result.timed_end_unix is not None:
        duration = result.timed_end_unix - result.timed_start_unix
    if not isinstance(telemetry, Mapping):
        empty = {f.key: Reading(note=NOT_RECORDED) for f in FIELDS}
        return InstanceTelemetry(run_id, result.name, empty, {}, duration)
    readings = {f.key: _process_reading(telemetry) if f.source == PROCESS_CPU
                else _gpu_reading(telemetry, f) for f in FIELDS}
    return InstanceTelemetry(run_id, result.name, readings, _gpu_series(telemetry), duration)


def combine(readings: Sequence[Reading]) -> Reading:
    """Over repeats: the mean of the means, the highest max; a field measured in no
    repeat keeps the first repeat's note."""
    measured = [r for r in readings if r.measured]
    if not measured:
        return readings[0] if readings else Reading(note=NOT_RECORDED)
    means = [r.mean for r in measured if r.mean is not None]
    maxima = [r.maximum for r in measured if r.maximum is not None]
    return Reading(sum(means) / len(means), max(maxima) if maxima else None)


def per_instance(found: Iterable[InstanceTelemetry]) -> dict[str, dict[str, Reading]]:
    """Instance name -> field key -> its reading combined over the repeats."""
    grouped: dict[str, dict[str, list[Reading]]] = defaultdict(lambda: defaultdict(list))
    for item in found:
        for key, reading in item.readings.items():
            grouped[item.instance][key].append(reading)
    return {name: {key: combine(values) for key, values in fields.items()}
            for name, fields in grouped.items()}


def cell(reading: Reading, with_max: bool = True) -> str:
    """"87.0 / 92.0" (mean / max), "87.0" without the max, or the note in words."""
    if not reading.measured:
        return reading.note or NOT_RECORDED
    if not with_max or reading.maximum is None:
        return number(reading.mean)
    return f"{number(reading.mean)} / {number(reading.maximum)}"


def export_columns(item: InstanceTelemetry) -> dict[str, Any]:
    """The CSV telemetry columns of one instance row (CSV_COLUMNS)."""
    row: dict[str, Any] = {}
    notes = []
    for field in FIELDS:
        reading = item.readings[field.key]
        row[f"{field.key}_mean"] = reading.mean
        row[f"{field.key}_max"] = reading.maximum
        if reading.note:
            notes.append(f"{field.key}: {reading.note}")
    row["telemetry_notes"] = "; ".join(notes)
    return row


def as_dict(item: InstanceTelemetry) -> dict[str, Any]:
    """The JSON export: field key -> {mean, max, unit, note}."""
    return {field.key: {"mean": item.readings[field.key].mean,
                        "max": item.readings[field.key].maximum, "unit": field.unit,
                        "note": item.readings[field.key].note} for field in FIELDS}


# What a compact table shows of each field: (field key, with its max).
_TABLE_COLUMNS: tuple[tuple[str, bool], ...] = (
    ("gpu_util", True), ("mem_used_mib", True), ("power_w", True), ("sm_clock_mhz", False),
    ("process_cpu_pct", True),
)


def table_rows(readings: Mapping[str, Mapping[str, Reading]]
               ) -> tuple[list[str], list[list[str]]]:
    """Headers and one row per instance: "GPU util % (mean / max)" etc."""
    headers = ["instance"]
    for key, with_max in _TABLE_COLUMNS:
        field = FIELD_BY_KEY[key]
        headers.append(f"{field.label} {field.unit} ({'mean / max' if with_max else 'mean'})")
    rows = [[name, *(cell(fields[key], with_max) for key, with_max in _TABLE_COLUMNS)]
            for name, fields in readings.items()]
    return headers, rows

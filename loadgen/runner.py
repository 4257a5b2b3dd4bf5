"""One harness run: bind the device, build or read the model, open the backend, warm up,
wait for the synchronised start, run LoadGen, and write result.json whatever happens."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import mlperf_loadgen as lg
import numpy as np

from loadgen import HARNESS_VERSION, SCHEMA_VERSION
from loadgen.backends import Backend
from loadgen.contract import LLM_MODEL
from loadgen.device import CPU_NOTE, DeviceBinding, bind_device
from loadgen.errors import HarnessError
from loadgen.gate import ACCURACY_LOG, run_accuracy_pass
from loadgen.mllog import summarize
from loadgen.models import ModelIO, build_model, builtin_model_io, read_model_io
from loadgen.models.cache import default_cache_dir
from loadgen.models.catalog import WEIGHT_SEED
from loadgen.qsl import SampleLibrary
from loadgen.result import write_result
from loadgen.rules import mlperf_settings, ruled_spec, rules_record
from loadgen.spec import LoadgenSpec, Spec
from loadgen.stability import run_windows
from loadgen.sut import SampleDispatcher
from loadgen.sync import StdinSync
from loadgen.telemetry import Telemetry
from loadgen.versions import version_info

SUMMARY_LOG = "mlperf_log_summary.txt"
DETAIL_LOG = "mlperf_log_detail.txt"
MS_TO_NS = 1_000_000
TIMELINE_POINTS = 2000


def loadgen_settings(spec: LoadgenSpec, performance_count: int) -> Any:
    """LoadGen TestSettings from the spec; the scenario decides what each target means."""
    settings = lg.TestSettings()
    settings.scenario = getattr(lg.TestScenario, spec.scenario)
    settings.mode = getattr(lg.TestMode, spec.mode)
    settings.min_duration_ms = spec.min_duration_ms
    if spec.max_duration_ms is not None:
        settings.max_duration_ms = spec.max_duration_ms
    settings.min_query_count = spec.min_query_count
    settings.performance_sample_count_override = performance_count
    if spec.target_qps is not None:
        settings.offline_expected_qps = spec.target_qps
        settings.server_target_qps = spec.target_qps
    if spec.target_latency_ms is not None:
        latency_ns = round(spec.target_latency_ms * MS_TO_NS)
        settings.server_target_latency_ns = latency_ns
        settings.single_stream_expected_latency_ns = latency_ns
        settings.multi_stream_expected_latency_ns = latency_ns
    if spec.samples_per_query is not None:
        settings.multi_stream_samples_per_query = spec.samples_per_query
    return settings


def _log_settings(out_dir: Path) -> Any:
    output = lg.LogOutputSettings()
    output.outdir = str(out_dir)
    output.copy_summary_to_stdout = False
    output.copy_detail_to_stdout = False
    settings = lg.LogSettings()
    settings.log_output = output
    settings.enable_trace = False
    return settings


def _model_path(spec: Spec) -> Path:
    m = spec.model
    if m.path is not None:
        return Path(m.path)
    assert m.variant is not None
    return build_model(m.name, m.variant, m.precision, spec.cache_dir)


def _model_io(spec: Spec) -> tuple[Path | None, ModelIO]:
    """The ONNX file and its I/O; backend torch builds its own model and needs no file."""
    m = spec.model
    if spec.backend.name == "torch":
        assert m.variant is not None
        return None, builtin_model_io(m.name, m.variant, m.precision)
    path = _model_path(spec)
    return path, read_model_io(path)


def _open_backend(spec: Spec, model_path: Path | None, model_io: ModelIO) -> Backend:
    b = spec.backend
    if b.name == "torch":
        from loadgen.backends.pytorch import TorchBackend

        return TorchBackend(spec.model, b.threads, spec.device.kind, WEIGHT_SEED)
    if b.name == "triton":
        from loadgen.backends.triton import TritonBackend

        assert b.url and b.protocol and b.model_name and b.in_flight
        return TritonBackend(b.url, b.protocol, b.model_name, b.in_flight, model_io)
    from loadgen.backends.ort import OrtBackend

    assert model_path is not None
    return OrtBackend(str(model_path), b.threads, spec.device.kind, b.provider,
                      spec.model.precision, spec.cache_dir or default_cache_dir())


def _open_slowed(spec: Spec, model_path: Path | None, model_io: ModelIO) -> Backend:
    """The spec's backend, slowed by ``spec.slowdown`` when it asks for it."""
    backend = _open_backend(spec, model_path, model_io)
    if spec.slowdown:
        from loadgen.backends.slowed import SlowedBackend

        return SlowedBackend(backend, spec.slowdown)
    return backend


def _load_dataset(path: str | None) -> dict[str, np.ndarray] | None:
    if path is None:
        return None
    with np.load(path) as archive:
        return {key: archive[key] for key in archive.files}


def _tensor_dicts(tensors: Any) -> list[dict[str, Any]]:
    return [{"name": t.name, "dtype": str(t.dtype), "shape": list(t.shape)} for t in tensors]


def _device_record(binding: DeviceBinding, backend: dict[str, Any] | None,
                   telemetry: dict[str, Any] | None) -> dict[str, Any]:
    record: dict[str, Any] = {**binding.as_dict(), "execution_provider": None,
                              "gpu_name": None, "mig_profile": None, "mig_uuid": None}
    if backend:
        record["execution_provider"] = backend.get("execution_provider")
    gpu = (telemetry or {}).get("gpu")
    if gpu:
        record.update(gpu_name=gpu["name"], mig_profile=gpu["mig_profile"],
                      mig_uuid=gpu["mig_uuid"])
    if binding.kind == "cpu":
        record["note"] = CPU_NOTE
    elif gpu:
        what = f"MIG slice {gpu['mig_profile']} {gpu['mig_uuid']}" if gpu["is_mig"] else "GPU"
        record["note"] = f"{what} on {gpu['parent_name']}"
    else:
        record["note"] = f"{binding.kind} requested; NVML could not describe the device"
    return record


def _dataset_accuracy(spec: Spec, dispatcher: SampleDispatcher,
                      library: SampleLibrary) -> dict[str, Any] | None:
    """AccuracyOnly mode on a dataset: top-1 of the first output against its labels."""
    if library.labels is None or not dispatcher.predictions:
        return None
    indices = np.fromiter(dispatcher.predictions, dtype=np.int64)
    predicted = np.fromiter((p[0] for p in dispatcher.predictions.values()), dtype=np.int64)
    labels = np.asarray(library.labels).reshape(len(library.labels), -1)[:, 0][indices]
    return {"metric": "top1", "value": float(np.mean(predicted == labels)), "target": None,
            "samples": len(indices), "passed": None, "labels_from": f"dataset:{spec.dataset}"}


class _Run:
    """Collects the record's parts as the run goes; ``record()`` assembles them."""

    def __init__(self, spec: Spec, out_dir: Path) -> None:
        self.spec, self.out_dir = spec, out_dir
        self.reason: str | None = None
        self.model: dict[str, Any] | None = None
        self.backend: dict[str, Any] | None = None
        self.telemetry: dict[str, Any] | None = None
        self.sync: dict[str, Any] = {"mode": "none"}
        self.timed: tuple[float | None, float | None] = (None, None)
        self.sut: dict[str, Any] | None = None
        self.accuracy: dict[str, Any] | None = None
        self.qsl_load_s: float | None = None
        self.qsl_preload_s: float | None = None
        self.stability: dict[str, Any] | None = None
        self.timed_cpu_s: float | None = None

    def fail(self, exc: BaseException) -> None:
        if self.reason is None:
            self.reason = str(exc) if isinstance(exc, HarnessError) else \
                f"{type(exc).__name__}: {exc}"

    def record(self, binding: DeviceBinding) -> dict[str, Any]:
        detail = self.out_dir / DETAIL_LOG
        log = summarize(detail) if detail.exists() else {}
        failed = (self.sut or {}).get("failed_samples", 0)
        if failed and log.get("validity"):
            # LoadGen only sees completions; samples completed without inference make the
            # measurement meaningless whatever LoadGen concluded.
            validity = log["validity"]
            validity["loadgen_result"] = validity["result"]
            validity["result"] = "INVALID"
            validity["reasons"].append(f"harness: {failed} samples failed in the backend and "
                                       f"were completed without inference")
        host = socket.gethostname()
        return {
            "schema_version": SCHEMA_VERSION,
            "harness_version": HARNESS_VERSION,
            "software": version_info(),
            "status": "failed" if self.reason else "ok",
            "reason": self.reason,
            "instance_name": self.spec.instance_name or host,
            "host": host,
            "spec_source": self.spec.source,
            "spec": self.spec.as_dict(),
            "model": self.model,
            "loadgen_version": log.get("loadgen_version"),
            "scenario": log.get("scenario"),
            "mode": log.get("mode"),
            "settings": log.get("settings"),
            "requested_settings": log.get("requested_settings"),
            "throughput": log.get("throughput"),
            "latency_ns": log.get("latency_ns"),
            "query_latency_ns": log.get("query_latency_ns"),
            "query_count": log.get("query_count"),
            "samples_per_query": log.get("samples_per_query"),
            "sample_count": log.get("sample_count"),
            "overlatency_query_count": log.get("overlatency_query_count"),
            "validity": log.get("validity"),
            "early_stopping": log.get("early_stopping"),
            "loadgen_errors": log.get("loadgen_errors", []),
            "loadgen_warnings": log.get("loadgen_warnings", []),
            "accuracy": self.accuracy,
            "mlperf_rules": rules_record(self.spec, self.spec.loadgen.performance_sample_count),
            "sut": self.sut,
            "device": _device_record(binding, self.backend, self.telemetry),
            "backend": self.backend,
            "telemetry": self.telemetry,
            "sync": self.sync,
            "timed_start_unix": self.timed[0],
            "timed_end_unix": self.timed[1],
            "qsl_load_s": self.qsl_load_s,
            "qsl_preload_s": self.qsl_preload_s,
            "stability": self.stability,
            "logs": {name: name for name in (SUMMARY_LOG, DETAIL_LOG, ACCURACY_LOG)
                     if (self.out_dir / name).exists()},
        }


def completion_timeline(points: list[tuple[float, int]], start: float,
                        limit: int = TIMELINE_POINTS) -> dict[str, list[float]]:
    """Samples completed by each moment of the timed run, from ``start`` (0 samples) to the
    last completion; thinned evenly to at most ``limit`` points (the last always kept), so
    that the orchestrator can count any instance's samples inside the window all shared."""
    if len(points) > limit:
        step = len(points) / (limit - 1)
        points = [points[int(i * step)] for i in range(limit - 1)] + [points[-1]]
    return {"unix": [start, *(t for t, _ in points)],
            "samples": [0.0, *(float(n) for _, n in points)]}


def _run_loadgen(state: _Run, backend: Backend, library: SampleLibrary,
                 telemetry: Telemetry) -> None:
    spec = state.spec
    dispatcher = SampleDispatcher(backend, library, spec.batch_size,
                                  keep_predictions=spec.loadgen.mode == "AccuracyOnly")
    sut = lg.ConstructSUT(dispatcher.issue_queries, dispatcher.flush_queries)
    qsl = lg.ConstructQSL(library.total_count, library.performance_count,
                          library.load, library.unload)
    telemetry.start()
    settings = (mlperf_settings(spec, library.performance_count) if spec.loadgen.mlperf_rules
                else loadgen_settings(spec.loadgen, library.performance_count))
    called, called_cpu = time.time(), time.process_time()
    try:
        lg.StartTestWithLogSettings(sut, qsl, settings, _log_settings(state.out_dir))
    finally:
        ended, ended_cpu = time.time(), time.process_time()
        dispatcher.stop()
        lg.DestroyQSL(qsl)
        lg.DestroySUT(sut)
    # LoadGen's timed part begins once the samples are loaded and its work ends with the
    # last completed sample (what follows is LoadGen writing its report).
    state.timed = (library.first_load_end or called, dispatcher.last_completion_unix or ended)
    state.timed_cpu_s = ended_cpu - (library.first_load_end_cpu or called_cpu)
    state.qsl_load_s = library.load_seconds
    state.sut = {"batch_size": spec.batch_size, "batches": dispatcher.batches,
                 "completed_samples": dispatcher.completed_samples,
                 "failed_samples": dispatcher.failed_samples,
                 "completions": completion_timeline(dispatcher.timeline, state.timed[0])}
    state.accuracy = _dataset_accuracy(spec, dispatcher, library)
    if dispatcher.error:
        state.reason = dispatcher.error


def _end_timed_part(state: _Run, backend: Backend | None,
                    telemetry: Telemetry | None) -> None:
    """Telemetry and the server's statistics cover the timed run only."""
    if telemetry is not None:
        state.telemetry = telemetry.stop()
        # Exact CPU time of this process (all threads) during LoadGen's timed part.
        state.telemetry["host"]["process_cpu_seconds_timed"] = state.timed_cpu_s
    if backend is not None:
        stats = backend.statistics()
        if stats is not None and state.backend is not None:
            state.backend["server_statistics"] = stats


def _prepare(state: _Run, backend: Backend, library: SampleLibrary) -> None:
    """Everything before READY: the samples made, the warm-up queries and the stability
    window, so that after GO an instance does nothing but the timed test."""
    spec = state.spec
    state.qsl_preload_s = library.preload()
    keep = getattr(backend, "keep_samples", None)
    if keep is not None and library.preloaded is not None and keep(library.preloaded):
        state.backend = backend.describe()
    warm = library.warmup_feeds(spec.batch_size)
    for _ in range(spec.warmup_queries):
        backend.infer(warm)
    if spec.stability is not None:
        state.stability = run_windows(backend, warm, spec.batch_size, spec.stability)


def run(spec: Spec, out_dir: str | Path, sync: StdinSync | None = None) -> dict[str, Any]:
    """Run the spec and write ``out_dir/result.json``; returns the record (status ok or
    failed). Only a broken record (a bug) raises."""
    if spec.model.name == LLM_MODEL:
        from loadgen.llm.run import run_llm

        return run_llm(spec, out_dir, sync)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for stale in (SUMMARY_LOG, DETAIL_LOG, ACCURACY_LOG):
        (out / stale).unlink(missing_ok=True)
    spec = ruled_spec(spec)
    binding = bind_device(spec.device)
    state = _Run(spec, out)
    backend: Backend | None = None
    telemetry: Telemetry | None = None
    timed_ended = False
    try:
        model_path, model_io = _model_io(spec)
        state.model = {"path": str(model_path) if model_path else None,
                       "builtin": spec.model.builtin,
                       "inputs": _tensor_dicts(model_io.inputs),
                       "outputs": _tensor_dicts(model_io.outputs)}
        library = SampleLibrary(model_io, spec.seed, spec.loadgen.performance_sample_count,
                                _load_dataset(spec.dataset))
        backend = _open_slowed(spec, model_path, model_io)
        state.backend = backend.describe()
        _prepare(state, backend, library)
        telemetry = Telemetry(spec.device)
        backend.mark_statistics_start()
        if sync is not None:
            sync.ready()
            state.sync = sync.wait_for_go()
        _run_loadgen(state, backend, library, telemetry)
        _end_timed_part(state, backend, telemetry)
        timed_ended = True
        if spec.accuracy is not None and state.reason is None:
            state.accuracy = run_accuracy_pass(spec, backend, model_io, model_path, out,
                                               _log_settings)
    except Exception as exc:
        state.fail(exc)
    finally:
        if not timed_ended:
            _end_timed_part(state, backend, telemetry)
        if backend is not None:
            backend.close()
    record = state.record(binding)
    write_result(out, record)
    return record

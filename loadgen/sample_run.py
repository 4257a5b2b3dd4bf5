"""One run of a sample model (resnet50, bert): bind the device, build or read the model,
open the backend, warm up, wait for the synchronised start, run LoadGen, and write
result.json whatever happens."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mlperf_loadgen as lg
import numpy as np

from loadgen.backends import Backend
from loadgen.device import bind_device
from loadgen.gate import run_accuracy_pass
from loadgen.models import ModelIO, build_model, builtin_model_io, read_model_io
from loadgen.models.cache import default_cache_dir
from loadgen.models.catalog import WEIGHT_SEED
from loadgen.qsl import SampleLibrary
from loadgen.result import write_result
from loadgen.rules import mlperf_settings, ruled_spec
from loadgen.runrecord import (
    RunRecord,
    completion_timeline,
    fresh_out_dir,
    loadgen_settings,
    log_settings,
)
from loadgen.spec import Spec
from loadgen.stability import run_windows
from loadgen.sut import SampleDispatcher
from loadgen.sync import StdinSync
from loadgen.telemetry import SERVER_COMMANDS, Telemetry


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

        return TorchBackend(spec.model, b.threads, spec.device.kind, WEIGHT_SEED,
                            spec.batch_size)
    if b.name == "triton":
        from loadgen.backends.triton import TritonBackend

        assert b.url and b.protocol and b.model_name and b.in_flight
        return TritonBackend(b.url, b.protocol, b.model_name, b.in_flight, model_io)
    from loadgen.backends.ort import OrtBackend

    assert model_path is not None
    return OrtBackend(str(model_path), b.threads, spec.device.kind, b.provider,
                      spec.model.precision, spec.cache_dir or default_cache_dir())


# Set only by the simulator lab's guests (vgpu sim): the share of the work a simulated
# upgraded host takes away, so that a lab without GPUs can show a host that regressed, and
# the compute slices of the guest's simulated GPU where the lab paces runs as a GPU
# (`vgpu sim up --device-model gpu`).
SIM_HOST_SLOWDOWN = "VGPU_SIM_HOST_SLOWDOWN"
SIM_DEVICE_SLICES = "VGPU_SIM_DEVICE_SLICES"


def _open_slowed(spec: Spec, model_path: Path | None, model_io: ModelIO) -> Backend:
    """The spec's backend, slowed by ``spec.slowdown`` when it asks for it, and by the
    simulator lab's host slowdown where its guest sets one; paced as the lab's simulated
    GPU where the guest has one."""
    backend = _open_backend(spec, model_path, model_io)
    from loadgen.backends.slowed import SlowedBackend

    host_slowdown = _sim_number(SIM_HOST_SLOWDOWN, 0.0, 0.9)
    slices = int(_sim_number(SIM_DEVICE_SLICES, 1.0, 65.0))
    if slices:
        from loadgen.backends.simulated_device import SimulatedDevice, device_rate

        # The device sets the pace: a slowdown slows the device, since a slower CPU
        # computing ahead of it would not show.
        kept = (1.0 - spec.slowdown) * (1.0 - host_slowdown)
        return SimulatedDevice(backend, device_rate(spec.model.name, slices),
                               slowdown=1.0 - kept, injected=spec.slowdown)
    if spec.slowdown:
        backend = SlowedBackend(backend, spec.slowdown)
    if host_slowdown:
        backend = SlowedBackend(backend, host_slowdown, "simulated_host_slowdown")
    return backend


def _sim_number(name: str, low: float, high: float) -> float:
    """A simulator lab's setting from the environment: 0 when unset or outside
    [low, high)."""
    try:
        value = float(os.environ.get(name) or 0.0)
    except ValueError:
        return 0.0
    return value if low <= value < high and value > 0 else 0.0


def _load_dataset(path: str | None) -> dict[str, np.ndarray] | None:
    if path is None:
        return None
    with np.load(path) as archive:
        return {key: archive[key] for key in archive.files}


def _tensor_dicts(tensors: Any) -> list[dict[str, Any]]:
    return [{"name": t.name, "dtype": str(t.dtype), "shape": list(t.shape)} for t in tensors]


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


def _run_loadgen(state: RunRecord, backend: Backend, library: SampleLibrary,
                 telemetry: Telemetry) -> None:
    spec = state.spec
    dispatcher = SampleDispatcher(backend, library, spec.batch_size,
                                  keep_predictions=spec.loadgen.mode == "AccuracyOnly")
    sut = dispatcher.construct_sut()
    qsl = lg.ConstructQSL(library.total_count, library.performance_count,
                          library.load, library.unload)
    telemetry.start()
    settings = (mlperf_settings(spec, library.performance_count) if spec.loadgen.mlperf_rules
                else loadgen_settings(spec.loadgen, library.performance_count))
    called, called_cpu = time.time(), time.process_time()
    try:
        lg.StartTestWithLogSettings(sut, qsl, settings, log_settings(state.out_dir))
    finally:
        ended, ended_cpu = time.time(), time.process_time()
        dispatcher.stop()
        lg.DestroyQSL(qsl)
        dispatcher.destroy_sut(sut)
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


def _end_timed_part(state: RunRecord, backend: Backend | None,
                    telemetry: Telemetry | None) -> None:
    """Telemetry and the server's statistics cover the timed run only."""
    if telemetry is not None:
        state.telemetry = telemetry.stop()
        # Exact CPU time of this process (all threads) during LoadGen's timed part.
        state.telemetry["host"]["process_cpu_seconds_timed"] = state.timed_cpu_s
    if backend is not None:
        end_timed = getattr(backend, "end_timed", None)
        if end_timed is not None and state.backend is not None:
            state.backend["simulated_device"] = end_timed()
        stats = backend.statistics()
        if stats is not None and state.backend is not None:
            state.backend["server_statistics"] = stats


def _prepare(state: RunRecord, backend: Backend, library: SampleLibrary) -> None:
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


OpenBackend = Callable[[Spec, Path | None, ModelIO], Backend]


def run_sample_model(spec: Spec, out_dir: str | Path, sync: StdinSync | None = None,
                     open_backend: OpenBackend | None = None) -> dict[str, Any]:
    """Run a resnet50/bert spec and write ``out_dir/result.json``; returns the record.
    ``open_backend`` replaces the spec's backend (benchmarks/harness_ceiling.py runs the
    harness around one that costs nothing)."""
    out = fresh_out_dir(out_dir)
    spec = ruled_spec(spec)
    binding = bind_device(spec.device)
    state = RunRecord(spec, out)
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
        backend = (open_backend or _open_slowed)(spec, model_path, model_io)
        state.backend = backend.describe()
        _prepare(state, backend, library)
        telemetry = Telemetry(spec.device, servers=SERVER_COMMANDS.get(spec.backend.name, ()))
        backend.mark_statistics_start()
        if sync is not None:
            sync.ready()
            state.sync = sync.wait_for_go()
        _run_loadgen(state, backend, library, telemetry)
        _end_timed_part(state, backend, telemetry)
        timed_ended = True
        if spec.accuracy is not None and state.reason is None:
            state.accuracy = run_accuracy_pass(spec, backend, model_io, model_path, out,
                                               log_settings)
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

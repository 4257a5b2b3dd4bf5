"""The accuracy pass after a performance run: LoadGen AccuracyOnly (Offline, every one of
the bounded samples once) on the backend under test, scored against the fp32 CPU
reference of the same model (or a dataset's labels). Its LoadGen logs go to
``accuracy/``; ``mlperf_log_accuracy.json`` is kept next to result.json."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import mlperf_loadgen as lg
import numpy as np

from loadgen.accuracy import (
    REFERENCE_FOLDER,
    Infer,
    ReferenceRun,
    file_digest,
    gate_record,
    in_index_order,
    load_dataset,
    read_accuracy_log,
    reference_predictions,
)
from loadgen.backends import Backend
from loadgen.contract import AccuracySpec, InferenceRunSpec
from loadgen.errors import RunFailed
from loadgen.models import build_model, builtin_model_io, default_cache_dir, read_model_io
from loadgen.models.catalog import WEIGHT_SEED
from loadgen.qsl import SampleLibrary
from loadgen.sut import SampleDispatcher

ACCURACY_LOG = "mlperf_log_accuracy.json"
ACCURACY_DIR = "accuracy"
REFERENCE_PRECISION = "fp32"


def reference_cache_dir(spec: InferenceRunSpec) -> Path:
    gate = spec.accuracy
    if gate is not None and gate.cache_dir:
        return Path(gate.cache_dir)
    return Path(spec.cache_dir or default_cache_dir()) / REFERENCE_FOLDER


def _cast_to(infer: Infer, dtypes: dict[str, np.dtype]) -> Infer:
    return lambda feeds: infer({k: v.astype(dtypes[k], copy=False) for k, v in feeds.items()})


def _onnx_reference(path: Path, threads: int | None) -> Infer:
    from loadgen.backends.ort import OrtBackend

    backend = OrtBackend(str(path), threads, "cpu")
    return _cast_to(backend.infer, {t.name: t.dtype for t in read_model_io(path).inputs})


def _torch_reference(spec: InferenceRunSpec) -> Infer:
    from loadgen.backends.pytorch import TorchBackend

    model = replace(spec.model, precision=REFERENCE_PRECISION)
    backend = TorchBackend(model, spec.backend.threads, "cpu", WEIGHT_SEED)
    assert model.variant is not None
    io = builtin_model_io(model.name, model.variant, REFERENCE_PRECISION)
    return _cast_to(backend.infer, {t.name: t.dtype for t in io.inputs})


def reference_run(spec: InferenceRunSpec, model_path: Path | None) -> ReferenceRun:
    """The fp32 CPU twin of the model under test: the fp32 build of a built-in model (same
    seed, so the same weights) or the user's ONNX file, on ONNX Runtime's CPU provider;
    backend torch's own model on the CPU in fp32."""
    m, threads = spec.model, spec.backend.threads
    if spec.backend.name == "torch":
        identity = {"torch": m.name, "variant": m.variant, "seed": WEIGHT_SEED}
        return ReferenceRun("torch cpu fp32", identity, lambda: _torch_reference(spec))
    if m.builtin:
        assert m.variant is not None
        path = build_model(m.name, m.variant, REFERENCE_PRECISION, spec.cache_dir)
    else:
        assert model_path is not None
        path = model_path
    identity = {"model_sha256": file_digest(path)}
    return ReferenceRun("onnxruntime CPUExecutionProvider fp32", identity,
                        lambda: _onnx_reference(path, threads))


def _library(spec: InferenceRunSpec, gate: AccuracySpec, model_io: Any,
             dataset: dict[str, np.ndarray] | None) -> SampleLibrary:
    count = len(dataset["labels"]) if dataset is not None else gate.samples
    return SampleLibrary(model_io, spec.seed, count, dataset)


def _input_identity(spec: InferenceRunSpec, library: SampleLibrary,
                    gate: AccuracySpec) -> dict[str, Any]:
    tensors = [[t.name, str(t.dtype), list(t.shape)] for t in library.inputs]
    source: dict[str, Any] = {"seed": spec.seed, "vocab_size": library.vocab_size}
    if gate.dataset:
        source = {"dataset_sha256": file_digest(gate.dataset)}
    return {"tensors": tensors, "samples": library.total_count, **source}


def _settings(count: int) -> Any:
    settings = lg.TestSettings()
    settings.scenario = lg.TestScenario.Offline
    settings.mode = lg.TestMode.AccuracyOnly
    settings.performance_sample_count_override = count
    return settings


def _loadgen_accuracy(backend: Backend, library: SampleLibrary, batch_size: int,
                      log_settings: Any) -> str | None:
    """Runs LoadGen AccuracyOnly; the backend's error, if any."""
    # The backend may keep the timed run's samples on its device; these are others.
    dispatcher = SampleDispatcher(backend, library, batch_size, keep_predictions=True,
                                  rows_only=False)
    sut = dispatcher.construct_sut()
    qsl = lg.ConstructQSL(library.total_count, library.performance_count,
                          library.load, library.unload)
    try:
        lg.StartTestWithLogSettings(sut, qsl, _settings(library.total_count), log_settings)
    finally:
        dispatcher.stop()
        lg.DestroyQSL(qsl)
        dispatcher.destroy_sut(sut)
    return dispatcher.error


def run_accuracy_pass(spec: InferenceRunSpec, backend: Backend, model_io: Any,
                      model_path: Path | None, out_dir: Path,
                      log_settings_for: Any) -> dict[str, Any]:
    """The record's ``accuracy``; a backend failure or a bad dataset raises."""
    gate = spec.accuracy
    assert gate is not None
    started = time.perf_counter()
    dataset = load_dataset(gate.dataset, model_io, gate.samples) if gate.dataset else None
    library = _library(spec, gate, model_io, dataset)
    indices = list(range(library.total_count))
    library.load(indices)
    reference = reference_predictions(reference_run(spec, model_path),
                                      library.batch(np.asarray(indices)),
                                      _input_identity(spec, library, gate),
                                      reference_cache_dir(spec))
    library.unload(indices)
    log_dir = out_dir / ACCURACY_DIR
    log_dir.mkdir(parents=True, exist_ok=True)
    error = _loadgen_accuracy(backend, library, spec.batch_size, log_settings_for(log_dir))
    if error:
        raise RunFailed(f"accuracy pass: {error}")
    log = out_dir / ACCURACY_LOG
    os.replace(log_dir / ACCURACY_LOG, log)
    logged = read_accuracy_log(log, len(model_io.outputs))
    predictions = in_index_order(logged, library.total_count, log)
    record = gate_record(gate, spec.model.name, predictions, reference,
                         None if dataset is None else dataset["labels"])
    record["duration_s"] = time.perf_counter() - started
    record["log"] = ACCURACY_LOG
    return record

"""The accuracy gate on the node: labels (an fp32 CPU reference run of the same model on
the same inputs, cached by content hash, or a user's .npz dataset), LoadGen's accuracy log
read back, and the score against the target.

A prediction is the argmax of every model output per sample (ResNet50: the class; BERT:
the start and the end of the answer span), which is what the SUT hands LoadGen in
AccuracyOnly mode and what ``mlperf_log_accuracy.json`` holds (int64 each)."""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from loadgen.contract import HARNESS_VERSION, AccuracySpec
from loadgen.errors import RunFailed
from loadgen.models import ModelIO

REFERENCE_LABELS = "fp32-cpu-reference"
AGREEMENT_METRICS = {"resnet50": "top1-agreement", "bert": "span-agreement"}
GENERIC_AGREEMENT = "argmax-agreement"
DATASET_METRIC = "top1"
REFERENCE_FOLDER = "references"
REFERENCE_CHUNK = 16
PREDICTION_DTYPE = np.dtype(np.int64)
_DATASET_FIX = ("save it with numpy.savez(path, images=<N,C,H,W float32>, "
                "labels=<N integer class ids>)")

Infer = Callable[[dict[str, np.ndarray]], list[np.ndarray]]


def argmax_per_output(outputs: Sequence[np.ndarray], count: int) -> np.ndarray:
    """[count, outputs] int64: each output's argmax over everything but the batch."""
    columns = [np.asarray(o).reshape(count, -1).argmax(axis=1) for o in outputs]
    return np.ascontiguousarray(np.stack(columns, axis=1), dtype=PREDICTION_DTYPE)


def read_accuracy_log(path: Path, width: int) -> dict[int, np.ndarray]:
    """Sample index -> its prediction, from LoadGen's mlperf_log_accuracy.json."""
    predictions = {}
    for entry in json.loads(path.read_text() or "[]"):
        values = np.frombuffer(bytes.fromhex(entry["data"]), dtype=PREDICTION_DTYPE)
        if len(values) != width:
            raise RunFailed(f"{path}: sample {entry['qsl_idx']} holds {len(values)} values, "
                            f"expected {width} (one per model output)")
        predictions[int(entry["qsl_idx"])] = values
    return predictions


def _dataset_error(path: str, field: str, message: str) -> RunFailed:
    return RunFailed(f"accuracy.dataset {path}: {field}: {message} (fix: {_DATASET_FIX})")


def _read_npz(path: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as archive:
            missing = [k for k in ("images", "labels") if k not in archive.files]
            if missing:
                raise _dataset_error(path, missing[0], f"no such array (it has: "
                                     f"{', '.join(archive.files) or 'nothing'})")
            return archive["images"], archive["labels"]
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise _dataset_error(path, "(file)", f"not a readable .npz: {exc}") from exc


def load_dataset(path: str, model_io: ModelIO, limit: int) -> dict[str, np.ndarray]:
    """The first ``limit`` samples as {model input name: images, 'labels': labels}; every
    problem names the file and the array."""
    if len(model_io.inputs) != 1 or model_io.inputs[0].dtype.kind != "f":
        raise RunFailed(f"accuracy.dataset {path}: an images dataset needs a model with one "
                        f"float input; this one has {list(model_io.input_names)} (fix: remove "
                        "accuracy.dataset to gate against the fp32 CPU reference)")
    images, labels = _read_npz(path)
    tensor = model_io.inputs[0]
    if images.ndim != 4 or images.dtype.kind != "f":
        raise _dataset_error(path, "images", f"must be a 4-D float array (N, C, H, W), got "
                             f"{images.dtype} of shape {images.shape}")
    expected = tensor.sample_shape
    if any(want is not None and want != got for want, got in zip(expected, images.shape[1:],
                                                                  strict=False)):
        raise _dataset_error(path, "images", f"sample shape {images.shape[1:]} does not fit "
                             f"model input {tensor.name!r} {expected}")
    if labels.ndim != 1 or labels.dtype.kind not in "iu" or len(labels) != len(images):
        raise _dataset_error(path, "labels", f"must be {len(images)} integers (one per "
                             f"image), got {labels.dtype} of shape {labels.shape}")
    classes = model_io.outputs[0].shape[-1] if model_io.outputs else None
    if len(labels) and classes and (labels.min() < 0 or labels.max() >= classes):
        raise _dataset_error(path, "labels", f"values run from {labels.min()} to "
                             f"{labels.max()}, the model has classes 0..{classes - 1}")
    count = min(limit, len(labels))
    return {tensor.name: images[:count].astype(tensor.dtype), "labels": labels[:count]}


def file_digest(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class ReferenceRun:
    """Where the reference comes from: ``identity`` (model bytes' hash or the torch build)
    keys the cache together with the inputs; ``infer`` runs it when the cache misses."""

    runtime: str
    identity: dict[str, Any]
    infer: Callable[[], Infer]


@dataclass(frozen=True)
class Reference:
    predictions: np.ndarray
    cache_hit: bool
    cache_file: Path
    runtime: str


def reference_key(run: ReferenceRun, inputs: dict[str, Any]) -> str:
    identity = {"harness_version": HARNESS_VERSION, "reference": run.identity,
                "inputs": inputs}
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def _compute(infer: Infer, feeds: dict[str, np.ndarray], count: int) -> np.ndarray:
    parts = []
    for start in range(0, count, REFERENCE_CHUNK):
        chunk = {name: array[start:start + REFERENCE_CHUNK] for name, array in feeds.items()}
        rows = len(next(iter(chunk.values())))
        parts.append(argmax_per_output(infer(chunk), rows))
    return np.concatenate(parts)


def reference_predictions(run: ReferenceRun, feeds: dict[str, np.ndarray],
                          inputs: dict[str, Any], cache_dir: Path) -> Reference:
    """The reference's predictions for ``feeds`` (every sample, in index order), computed
    once and then read from ``cache_dir``."""
    count = len(next(iter(feeds.values())))
    path = cache_dir / f"reference-{reference_key(run, inputs)[:24]}.npy"
    if path.is_file():
        cached = np.load(path, allow_pickle=False)
        if cached.shape[0] == count:
            return Reference(cached, True, path, run.runtime)
    predictions = _compute(run.infer(), feeds, count)
    cache_dir.mkdir(parents=True, exist_ok=True)
    # Instances on one host may compute the same reference at once: the rename is atomic.
    tmp = path.with_suffix(f".{os.getpid()}.tmp.npy")
    np.save(tmp, predictions)
    os.replace(tmp, path)
    return Reference(predictions, False, path, run.runtime)


def agreement(predictions: np.ndarray, reference: np.ndarray) -> float:
    """Share of samples whose every output's argmax equals the reference's."""
    return float(np.mean(np.all(predictions == reference, axis=1)))


def top1(predictions: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(predictions[:, 0] == np.asarray(labels).reshape(-1)))


def in_index_order(logged: dict[int, np.ndarray], count: int, path: Path) -> np.ndarray:
    missing = [i for i in range(count) if i not in logged]
    if missing:
        raise RunFailed(f"{path}: LoadGen logged no response for {len(missing)} of {count} "
                        f"samples (first: {missing[0]})")
    return np.stack([logged[i] for i in range(count)])


def gate_record(gate: AccuracySpec, model_name: str, predictions: np.ndarray,
                reference: Reference, labels: np.ndarray | None) -> dict[str, Any]:
    """The result record's ``accuracy``. Against a dataset, the target is relative to the
    fp32 reference's own top-1 (as MLPerf's 99.9% of FP32); else it is the agreement."""
    reference_value: float | None = None
    if labels is None:
        metric = AGREEMENT_METRICS.get(model_name, GENERIC_AGREEMENT)
        value = agreement(predictions, reference.predictions)
        threshold, labels_from = gate.target, REFERENCE_LABELS
    else:
        metric, labels_from = DATASET_METRIC, f"dataset:{gate.dataset}"
        value = top1(predictions, labels)
        reference_value = top1(reference.predictions, labels)
        threshold = gate.target * reference_value
    return {
        "metric": metric, "value": value, "target": gate.target, "threshold": threshold,
        "samples": len(predictions), "passed": bool(value >= threshold),
        "labels_from": labels_from,
        "reference": {"runtime": reference.runtime, "value": reference_value,
                      "cache_hit": reference.cache_hit, "cache_file": str(reference.cache_file)},
    }

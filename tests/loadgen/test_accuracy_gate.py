"""The accuracy pass after a performance run: fp32 CPU reference labels (cached by content
hash), a numerics regression caught, a user's .npz dataset, and bad datasets named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from loadgen.accuracy import read_accuracy_log
from loadgen.contract import AccuracySpec
from loadgen.errors import SpecError
from loadgen.models import build_model
from loadgen.runner import run
from loadgen.spec import parse_spec
from tests.loadgen.harness_helpers import base_spec

TARGET = 0.999
FC_WEIGHTS_PREFIX = "fc_w"


def gated_run(model_cache: Path, work: Path, model: dict[str, Any],
              accuracy: dict[str, Any]) -> dict[str, Any]:
    doc = base_spec(model_cache, model=model, accuracy=accuracy)
    doc["loadgen"].update(min_duration_ms=200)
    return run(parse_spec(doc, "spec.json", work), work / "out")


@pytest.mark.parametrize(("name", "metric", "outputs"), [
    ("resnet50", "top1-agreement", 1), ("bert", "span-agreement", 2)])
def test_reference_agrees_with_the_same_model(model_cache: Path, tmp_path: Path, name: str,
                                              metric: str, outputs: int) -> None:
    record = gated_run(model_cache, tmp_path, {"name": name, "variant": "tiny"},
                       {"target": TARGET, "samples": 48, "cache_dir": str(tmp_path / "refs")})
    assert record["status"] == "ok", record["reason"]
    assert record["mode"] == "PerformanceOnly"  # the performance record is untouched
    assert record["throughput"]["samples_per_second"] > 0
    accuracy = record["accuracy"]
    assert accuracy["metric"] == metric
    assert accuracy["value"] == 1.0
    assert accuracy["passed"] is True
    assert (accuracy["target"], accuracy["threshold"], accuracy["samples"]) == (TARGET, TARGET, 48)
    assert accuracy["labels_from"] == "fp32-cpu-reference"
    assert accuracy["reference"]["runtime"] == "onnxruntime CPUExecutionProvider fp32"
    log = tmp_path / "out" / "mlperf_log_accuracy.json"
    assert record["logs"]["mlperf_log_accuracy.json"] == log.name
    logged = read_accuracy_log(log, outputs)
    assert sorted(logged) == list(range(48))


def test_reference_is_computed_once_and_reused(model_cache: Path, tmp_path: Path) -> None:
    gate = {"target": TARGET, "samples": 32, "cache_dir": str(tmp_path / "refs")}
    first = gated_run(model_cache, tmp_path / "a", {"name": "resnet50", "variant": "tiny"}, gate)
    cache_file = Path(first["accuracy"]["reference"]["cache_file"])
    assert first["accuracy"]["reference"]["cache_hit"] is False
    assert cache_file.parent == tmp_path / "refs"
    written = cache_file.stat().st_mtime_ns
    second = gated_run(model_cache, tmp_path / "b", {"name": "resnet50", "variant": "tiny"}, gate)
    assert second["accuracy"]["reference"]["cache_hit"] is True
    assert second["accuracy"]["reference"]["cache_file"] == str(cache_file)
    assert cache_file.stat().st_mtime_ns == written
    assert second["accuracy"]["value"] == 1.0
    # Other inputs (another seed) are another reference.
    doc = base_spec(model_cache, model={"name": "resnet50", "variant": "tiny"}, accuracy=gate,
                    seed=8)
    doc["loadgen"].update(min_duration_ms=200)
    third = run(parse_spec(doc, "spec.json", tmp_path), tmp_path / "c")
    assert third["accuracy"]["reference"]["cache_hit"] is False
    assert third["accuracy"]["reference"]["cache_file"] != str(cache_file)


def perturb_final_layer(path: Path) -> None:
    """Halves the classifier's weights and adds noise of their own size: a numerics
    regression that still runs at full speed."""
    model = onnx.load(str(path))
    for index, tensor in enumerate(model.graph.initializer):
        if tensor.name.startswith(FC_WEIGHTS_PREFIX):
            weights = numpy_helper.to_array(tensor).astype(np.float32)
            noise = np.random.default_rng(1).standard_normal(weights.shape) * weights.std()
            changed = (weights * 0.5 + noise).astype(numpy_helper.to_array(tensor).dtype)
            model.graph.initializer[index].CopyFrom(numpy_helper.from_array(changed, tensor.name))
    onnx.save(model, str(path))


def test_perturbed_fp16_model_fails_the_gate(tmp_path: Path) -> None:
    cache = tmp_path / "models"
    perturb_final_layer(build_model("resnet50", "tiny", "fp16", cache))
    record = gated_run(cache, tmp_path, {"name": "resnet50", "variant": "tiny",
                                         "precision": "fp16"}, {"target": TARGET, "samples": 64})
    assert record["status"] == "ok", record["reason"]
    accuracy = record["accuracy"]
    # The reference is the clean fp32 build of the same seed, on the CPU.
    assert accuracy["reference"]["cache_file"].startswith(str(cache / "references"))
    assert 0.0 < accuracy["value"] < TARGET
    assert accuracy["passed"] is False
    # A value is a whole number of the 64 samples.
    assert accuracy["value"] * 64 == pytest.approx(round(accuracy["value"] * 64))


def _dataset(model_cache: Path, path: Path, flipped: int) -> np.ndarray:
    model = build_model("resnet50", "tiny", "fp32", model_cache)
    images = np.random.default_rng(5).standard_normal((40, 3, 32, 32), dtype=np.float32)
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    labels = session.run(None, {"input": images})[0].argmax(axis=1)
    labels[:flipped] = (labels[:flipped] + 1) % 10
    np.savez(path, images=images, labels=labels)
    return labels


def test_npz_dataset_gives_real_top1(model_cache: Path, tmp_path: Path) -> None:
    _dataset(model_cache, tmp_path / "val.npz", flipped=10)
    record = gated_run(model_cache, tmp_path, {"name": "resnet50", "variant": "tiny"},
                       {"target": TARGET, "dataset": "val.npz", "samples": 1000})
    assert record["status"] == "ok", record["reason"]
    accuracy = record["accuracy"]
    assert accuracy["metric"] == "top1"
    assert accuracy["samples"] == 40  # the whole dataset, below the bound
    assert accuracy["value"] == pytest.approx(0.75)
    # The target is relative to the fp32 reference's own top-1 on the dataset.
    assert accuracy["reference"]["value"] == pytest.approx(0.75)
    assert accuracy["threshold"] == pytest.approx(TARGET * 0.75)
    assert accuracy["passed"] is True
    assert accuracy["labels_from"] == f"dataset:{tmp_path / 'val.npz'}"


def test_dataset_with_wrong_images_fails_naming_file_and_field(model_cache: Path,
                                                               tmp_path: Path) -> None:
    path = tmp_path / "bad.npz"
    np.savez(path, images=np.zeros((4, 3, 16, 16), np.float32), labels=np.zeros(4, np.int64))
    record = gated_run(model_cache, tmp_path, {"name": "resnet50", "variant": "tiny"},
                       {"target": TARGET, "dataset": "bad.npz"})
    assert record["status"] == "failed"
    assert f"accuracy.dataset {path}: images: sample shape (3, 16, 16)" in record["reason"]
    assert "numpy.savez" in record["reason"]
    np.savez(path, images=np.zeros((4, 3, 32, 32), np.float32), labels=np.full(4, 12))
    record = gated_run(model_cache, tmp_path, {"name": "resnet50", "variant": "tiny"},
                       {"target": TARGET, "dataset": "bad.npz"})
    assert f"accuracy.dataset {path}: labels: values run from 12 to 12" in record["reason"]


def test_broken_or_unsupported_datasets_are_spec_errors(model_cache: Path,
                                                        tmp_path: Path) -> None:
    (tmp_path / "broken.npz").write_bytes(b"not a zip")
    np.savez(tmp_path / "nolabels.npz", images=np.zeros((2, 3, 32, 32), np.float32))
    cases = {
        "broken.npz": f"accuracy.dataset: {tmp_path / 'broken.npz'} is not a readable .npz",
        "nolabels.npz": f"accuracy.dataset: {tmp_path / 'nolabels.npz'} has no array named "
                        "'labels'",
        "missing.npz": f"accuracy.dataset: {tmp_path / 'missing.npz'} is not an existing .npz",
    }
    for name, message in cases.items():
        doc = base_spec(model_cache, accuracy={"target": TARGET, "dataset": name})
        with pytest.raises(SpecError) as raised:
            parse_spec(doc, "spec.json", tmp_path)
        assert message in str(raised.value)
    doc = base_spec(model_cache, model={"name": "bert", "variant": "tiny"},
                    accuracy={"target": TARGET, "dataset": "squad.json"})
    with pytest.raises(SpecError, match="SQuAD dataset for bert is not supported yet"):
        parse_spec(doc, "spec.json", tmp_path)
    doc = base_spec(model_cache, accuracy={"target": 1.5, "sample": 3})
    with pytest.raises(SpecError) as raised:
        parse_spec(doc, "spec.json", tmp_path)
    assert "accuracy.target: must be a number in (0, 1], got 1.5" in str(raised.value)
    assert "accuracy.sample: unknown field (fix: did you mean accuracy.samples?)" in \
        str(raised.value)


def test_accuracy_section_round_trips(model_cache: Path, tmp_path: Path) -> None:
    doc = base_spec(model_cache, accuracy={"target": 0.99, "samples": 16})
    spec = parse_spec(doc, "spec.json", tmp_path)
    assert spec.accuracy == AccuracySpec(target=0.99, samples=16)
    again = parse_spec(json.loads(json.dumps(spec.to_json())), "spec.json", tmp_path)
    assert again == spec

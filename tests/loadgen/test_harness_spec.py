"""Run spec validation: every problem names the spec file, the field and the fix, and a
bad spec exits 2 before anything runs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from loadgen.errors import SpecError
from loadgen.spec import load_spec, parse_spec
from tests.loadgen.harness_helpers import base_spec, run_cli


def problems_of(doc: dict[str, Any], tmp_path: Path) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as caught:
        parse_spec(doc, "spec.json", tmp_path)
    return [(p.field, p.message) for p in caught.value.problems]


def test_defaults_fill_what_the_spec_leaves_out(tmp_path: Path) -> None:
    spec = parse_spec({"schema_version": 1, "model": {"name": "bert"}}, "s.json", tmp_path)
    assert (spec.model.variant, spec.model.precision) == ("large", "fp32")
    assert spec.model.input_names == ("input_ids", "input_mask", "segment_ids")
    assert (spec.backend.name, spec.device.kind) == ("onnxruntime", "cpu")
    assert (spec.loadgen.scenario, spec.loadgen.mode) == ("Offline", "PerformanceOnly")
    assert spec.batch_size == 1 and spec.loadgen.performance_sample_count == 256


def test_triton_backend_defaults(tmp_path: Path) -> None:
    spec = parse_spec({"schema_version": 1, "model": {"name": "resnet50"},
                       "backend": {"name": "triton", "protocol": "http"}}, "s.json", tmp_path)
    assert (spec.backend.url, spec.backend.model_name, spec.backend.in_flight) == (
        "localhost:8000", "resnet50", 2)


def test_all_problems_are_reported_together(tmp_path: Path) -> None:
    doc = base_spec(tmp_path, batch_size=0, seed=-1)
    doc["loadgen"].update(scenario="Batch", min_duration_ms=0, target_qps=-5)
    doc["device"] = {"kind": "mig"}
    doc["backend"]["treads"] = 2
    found = dict(problems_of(doc, tmp_path))
    assert "Batch" in found["loadgen.scenario"]
    assert found["loadgen.min_duration_ms"] == "must be >= 1, got 0"
    assert "must be a number > 0" in found["loadgen.target_qps"]
    assert found["batch_size"] == "must be >= 1, got 0"
    assert found["seed"] == "must be >= 0, got -1"
    assert "MIG device UUID" in found["device.uuid"]
    assert found["backend.treads"] == "unknown field"


def test_unknown_field_suggests_the_close_name(tmp_path: Path) -> None:
    doc = base_spec(tmp_path)
    doc["loadgen"]["min_duration"] = 100
    with pytest.raises(SpecError) as caught:
        parse_spec(doc, "spec.json", tmp_path)
    assert "did you mean loadgen.min_duration_ms?" in str(caught.value)


def test_options_that_do_not_apply_are_refused(tmp_path: Path) -> None:
    doc = base_spec(tmp_path)
    doc["backend"]["url"] = "localhost:8001"
    doc["loadgen"]["samples_per_query"] = 4
    doc["device"] = {"kind": "cpu", "index": 0}
    fields = [field for field, _ in problems_of(doc, tmp_path)]
    assert fields == ["backend.url", "device", "loadgen.samples_per_query"]


def test_accuracy_mode_needs_a_dataset(tmp_path: Path) -> None:
    doc = base_spec(tmp_path)
    doc["loadgen"]["mode"] = "AccuracyOnly"
    assert problems_of(doc, tmp_path) == [("loadgen.mode", "AccuracyOnly needs a dataset "
                                           "with labels")]


def test_dataset_arrays_must_match_model_inputs(tmp_path: Path) -> None:
    np.savez(tmp_path / "data.npz", images=np.zeros((2, 3, 32, 32), np.float32))
    found = problems_of(base_spec(tmp_path, dataset="data.npz"), tmp_path)
    assert [f for f, _ in found] == ["dataset", "dataset"]
    assert "no array named 'input' (it has: images)" in found[0][1]
    assert "no 'labels' array" in found[1][1]


def test_relative_paths_start_at_the_spec_folder(tmp_path: Path) -> None:
    np.savez(tmp_path / "data.npz", input=np.zeros((2, 3, 32, 32), np.float32),
             labels=np.zeros(2, np.int64))
    path = tmp_path / "spec.json"
    doc = base_spec(tmp_path, dataset="data.npz")
    doc["cache_dir"] = "models"
    path.write_text(json.dumps(doc))
    spec = load_spec(path)
    assert spec.dataset == str(tmp_path / "data.npz")
    assert spec.cache_dir == str(tmp_path / "models")


# The command line: bad specs exit 2 and the message names file, field and fix. ------------

def assert_exit_2(spec: Path, tmp_path: Path, *fragments: str) -> str:
    out = tmp_path / "out"
    result = run_cli("run", str(spec), "--out", str(out))
    assert result.returncode == 2, result.stderr
    assert str(spec) in result.stderr
    for fragment in fragments:
        assert fragment in result.stderr
    assert "(fix: " in result.stderr
    assert not (out / "result.json").exists()
    return result.stderr


def test_cli_unknown_model(write_spec: Callable[..., Path], tmp_path: Path) -> None:
    spec = write_spec(model={"name": "gpt2"})
    assert_exit_2(spec, tmp_path, "model.name: unknown model 'gpt2'",
                  "resnet50, bert, llm or the path of a .onnx file")


def test_cli_missing_model_file(write_spec: Callable[..., Path], tmp_path: Path) -> None:
    spec = write_spec(model={"name": "models/missing.onnx"})
    assert_exit_2(spec, tmp_path, "model.name: model file", "missing.onnx does not exist")


def test_cli_wrong_input_name(write_spec: Callable[..., Path], tmp_path: Path) -> None:
    spec = write_spec(model={"name": "bert", "variant": "tiny",
                             "input_names": ["input_ids", "attention_mask"]})
    assert_exit_2(spec, tmp_path, "model.input_names: 'attention_mask' is not an input",
                  "input_ids, input_mask, segment_ids")


def test_cli_zero_duration(write_spec: Callable[..., Path], tmp_path: Path) -> None:
    spec = write_spec(loadgen={"scenario": "Offline", "min_duration_ms": 0})
    assert_exit_2(spec, tmp_path, "loadgen.min_duration_ms: must be >= 1, got 0")


def test_cli_bad_scenario(write_spec: Callable[..., Path], tmp_path: Path) -> None:
    spec = write_spec(loadgen={"scenario": "offline"})
    assert_exit_2(spec, tmp_path, "loadgen.scenario: 'offline' is not one of",
                  "Offline, Server, SingleStream, MultiStream")


def test_cli_bad_json_and_missing_spec(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"schema_version": 1,,}')
    assert_exit_2(broken, tmp_path, "(line 1)", "not valid JSON")
    assert_exit_2(tmp_path / "nope.json", tmp_path, "cannot read the spec")


def test_cli_unknown_command() -> None:
    result = run_cli("bench")
    assert result.returncode == 2
    assert "run,model,triton-repo" in result.stderr

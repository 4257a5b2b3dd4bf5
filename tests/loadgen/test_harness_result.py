"""The result record's schema check and atomic write."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loadgen.result import schema_problems, write_result
from loadgen.runner import run
from loadgen.spec import parse_spec
from tests.loadgen.harness_helpers import base_spec


@pytest.fixture(scope="module")
def good_record(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("record")
    doc = base_spec(folder / "models")
    doc["loadgen"].update(min_duration_ms=100)
    return run(parse_spec(doc, "spec.json", folder), folder / "out")


def test_a_real_record_passes_and_echoes_the_spec(good_record: dict[str, Any]) -> None:
    assert schema_problems(good_record) == []
    assert good_record["spec"]["model"] == {"name": "resnet50", "variant": "tiny",
                                            "precision": "fp32", "path": None,
                                            "input_names": ["input"]}
    assert good_record["spec"]["loadgen"]["min_duration_ms"] == 100
    assert good_record["settings"]["min_duration_ms"] == 100


@pytest.mark.parametrize("change,problem", [
    ({"status": "done"}, "status: 'done' is not one of ('ok', 'failed')"),
    ({"status": "failed", "reason": None}, "reason: a failed record must say why"),
    ({"schema_version": 2}, "schema_version: must be 1"),
    ({"timed_start_unix": "soon"}, "timed_start_unix: str is not one of ['float', 'null']"),
    ({"validity": {"result": "MAYBE"}}, "validity.result: 'MAYBE' is not one of"),
    ({"latency_ns": {"min": 1}}, "latency_ns.p99: missing"),
    ({"throughput": None}, "throughput: an ok performance record needs it"),
])
def test_schema_catches_broken_records(good_record: dict[str, Any], change: dict[str, Any],
                                       problem: str) -> None:
    broken = {**good_record, **change}
    assert any(p.startswith(problem) for p in schema_problems(broken)), schema_problems(broken)


def test_missing_field_is_named(good_record: dict[str, Any]) -> None:
    broken = dict(good_record)
    del broken["device"]
    assert schema_problems(broken) == ["device: missing"]


def test_broken_record_is_never_written(good_record: dict[str, Any], tmp_path: Path) -> None:
    write_result(tmp_path, good_record)
    before = (tmp_path / "result.json").read_text()
    with pytest.raises(ValueError, match="status"):
        write_result(tmp_path, {**good_record, "status": "maybe"})
    assert (tmp_path / "result.json").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json"]
    assert json.loads(before)["status"] == "ok"

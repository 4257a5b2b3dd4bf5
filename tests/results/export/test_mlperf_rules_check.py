"""The v6.1 submission rules vgpu reads exported LoadGen logs against, on detail logs in
LoadGen's own `:::MLLOG` format: the reasons a real run cannot show (INVALID, other
seeds, a small sample library), the suite a system belongs to, and the truncation of a
large accuracy log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vgpu.results.export.mlperf_export import accuracy_text, truncated_accuracy_log
from vgpu.results.export.mlperf_rules import OFFICIAL_SEEDS, not_submittable, read_mllog
from vgpu.results.export.mlperf_system import mlperf_benchmark, system_type

COMPLIANT = {"result_validity": "VALID", "effective_min_duration_ms": 600000,
             "effective_performance_sample_count": 1024, "effective_min_query_count": 1,
             "effective_samples_per_query": 24576,
             **{f"effective_{key}": value for key, value in OFFICIAL_SEEDS.items()}}


def _detail(path: Path, values: dict[str, object], errors: tuple[str, ...] = ()) -> Path:
    lines = [":::MLLOG " + json.dumps({"key": key, "value": value, "time_ms": 1.0})
             for key, value in values.items()]
    lines += [":::MLLOG " + json.dumps({"key": "error", "value": text}) for text in errors]
    path.write_text("\n".join(["not an mllog line", *lines]) + "\n")
    return path


def _accuracy(path: Path, total: int = 50000) -> Path:
    return _detail(path, {"qsl_reported_total_count": total})


def test_a_compliant_log_has_no_reason(tmp_path: Path) -> None:
    performance = _detail(tmp_path / "p.txt", COMPLIANT)
    assert read_mllog(performance)["effective_min_duration_ms"] == 600000
    assert not_submittable("resnet50", "Offline", "closed", performance,
                           _accuracy(tmp_path / "a.txt")) == [
        "compliance: the closed division needs the audit runs TEST01, TEST04 in this "
        "result's folder; vgpu does not run them"]
    assert not_submittable("resnet50-tiny", "Offline", "open", performance,
                           _accuracy(tmp_path / "a.txt")) == []


@pytest.mark.parametrize(("change", "errors", "reason"), [
    ({"result_validity": "INVALID"}, (), "result: LoadGen marked the run INVALID"),
    ({"effective_qsl_rng_seed": 1}, (), "seeds: LoadGen did not run with the official v6.1 "
     "seeds (run under --mlperf-rules)"),
    ({"effective_performance_sample_count": 256}, (), "sample count: "
     "performance_sample_count was 256; the rules ask for at least 1024"),
    ({"effective_min_query_count": 0}, (), "query count: min_query_count was 0; the rules "
     "ask for 1"),
    ({}, ("Something went wrong",), "LoadGen error: Something went wrong"),
])
def test_each_rule_names_its_reason(tmp_path: Path, change: dict[str, object],
                                    errors: tuple[str, ...], reason: str) -> None:
    performance = _detail(tmp_path / "p.txt", {**COMPLIANT, **change}, errors)
    assert not_submittable("resnet50", "Offline", "open", performance,
                           _accuracy(tmp_path / "a.txt")) == [reason]


def test_closed_offline_needs_the_rules_samples_per_query(tmp_path: Path) -> None:
    performance = _detail(tmp_path / "p.txt", {**COMPLIANT,
                                               "effective_samples_per_query": 100})
    assert "sample count: the Offline query had 100 samples; the closed division asks for " \
        "24576" in not_submittable("resnet50", "Offline", "closed", performance,
                                   _accuracy(tmp_path / "a.txt"))


def test_a_model_outside_the_exported_benchmarks_says_so(tmp_path: Path) -> None:
    assert not_submittable("mymodel", "Offline", "open", tmp_path / "none",
                           None) == ["model: mymodel is none of the v6.1 benchmarks vgpu "
                                     "exports (resnet50, bert-99, bert-99.9)"]


def test_resnet50_and_bert_systems_are_edge_systems() -> None:
    assert system_type(["resnet50", "bert-99.9-tiny"]) == "edge"
    assert system_type(["resnet50-tiny", "mymodel"]) == "datacenter,edge"
    assert mlperf_benchmark("bert-99.9-tiny") == "bert-99.9"
    assert mlperf_benchmark("bert-99-small") == "bert-99"


def test_a_large_accuracy_log_keeps_its_ends_and_its_hash_names_the_full_log() -> None:
    full = b"[\n" + b"".join(b'{"seq_id": %d, "qsl_idx": %d, "data": "00"},\n' % (n, n)
                             for n in range(2000)) + b"]\n"
    cut = truncated_accuracy_log(full)
    assert len(full) > 10 * 1024 >= len(cut)
    assert cut.startswith(full[:4096]) and cut.endswith(full[-4096:])
    assert truncated_accuracy_log(b"[\n]\n") == b"[\n]\n"
    text = accuracy_text({"metric": "top1", "value": 0.75, "labels_from": "dataset:x"},
                         "ab12")
    assert text.splitlines()[0] == "accuracy=75.000%, labels: dataset:x"
    assert text.splitlines()[-1] == "hash=ab12"

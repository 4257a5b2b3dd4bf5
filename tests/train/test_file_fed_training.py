"""A real file-fed run of the harness: torch + DataLoader workers decode the shards that
`vgpu data make` wrote, and the record says what fed it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="the train extra (torch) is not installed")

from loadgen.errors import SpecError
from loadgen.train.spec import parse_train_spec
from vgpu.datasets.make import make_dataset

pytestmark = pytest.mark.train
BATCH, STEPS = 8, 6


def _train(tmp_path: Path, data: dict[str, Any]) -> dict[str, Any]:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({
        "schema_version": 1, "model": "resnet-tiny", "image_size": 32, "batch_size": BATCH,
        "warmup_steps": 1, "measured_steps": STEPS, "comm_probe_steps": 0, "data": data}))
    done = subprocess.run([sys.executable, "-m", "loadgen.train", "train", str(spec),
                           "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    record: dict[str, Any] = json.loads((tmp_path / "out" / "result.json").read_text())
    return record


def test_file_fed_run_records_its_input(tmp_path: Path) -> None:
    manifest = make_dataset(tmp_path / "set", 96, "small", seed=2, images_per_shard=12)
    record = _train(tmp_path, {"source": "files", "path": str(tmp_path / "set"),
                               "workers": 2})
    assert record["status"] == "ok"
    assert record["settings"]["data_source"] == "files"
    fed = record["input"]
    (rank,) = record["ranks"]
    assert rank["input"]["images"] == BATCH * STEPS
    assert fed["bytes_read"] == rank["input"]["bytes_read"] > BATCH * STEPS * 50_000
    assert fed["input_mb_per_s"] == pytest.approx(
        fed["bytes_read"] / 1e6 / rank["input"]["window_s"])
    assert fed["read_share"] + fed["decode_share"] == pytest.approx(1.0)
    assert 0 <= fed["data_wait_share"] <= 1
    assert fed["bound"] in ("compute", "decode", "storage")
    assert fed["workers"] == 2 and rank["input"]["worker_pids"] == 2
    assert fed["worker_cpu_utilisation"] > 0
    assert fed["gpu_utilisation_pct"] is None
    assert fed["gpu_utilisation_note"] == "no GPU: not measured"
    assert fed["dataset_bytes"] == manifest.total_bytes
    assert fed["page_cache_before_run"].startswith("evicted")
    assert fed["shared_shards"] is False


def test_files_source_needs_a_path_and_known_choices() -> None:
    with pytest.raises(SpecError) as caught:
        parse_train_spec({"schema_version": 1, "data": {"source": "files", "cache": "cold",
                                                        "workers": 0, "extra": 1}})
    fields = {p.field for p in caught.value.problems}
    assert fields == {"data.path", "data.cache", "data.workers", "data.extra"}


def test_synthetic_is_the_default() -> None:
    spec = parse_train_spec({"schema_version": 1})
    assert spec.data.source == "synthetic" and spec.data.path is None

"""An allreduce over one rank moves nothing between devices: the probe reports no bus
bandwidth for it (null, with the reason) instead of nccl-tests' 0, and vgpu's table and
metrics leave busbw out; two or more ranks keep it."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from rich.console import Console

from loadgen.train.allreduce import ONE_RANK_NOTE, bandwidth_note, bandwidth_rows
from vgpu.remote.local import LocalTransport
from vgpu.train.launch import Launch, TrainNode, run_launch

torch = pytest.importorskip("torch", reason="the train extra (torch) is not installed")

from vgpu.cli.train import probe_table  # noqa: E402
from vgpu.train.probe import probe_metrics  # noqa: E402

pytestmark = pytest.mark.train


def test_one_rank_has_no_bus_bandwidth(tmp_path: Path) -> None:
    node = TrainNode(name="n", shell=LocalTransport(), address="127.0.0.1",
                     workdir=str(tmp_path / "n"), python=sys.executable)
    spec = {"schema_version": 1, "sizes_bytes": [4096, 65536], "iterations": 2,
            "warmup_iterations": 1}
    record = run_launch(Launch([node], 1, "allreduce", spec), tmp_path / "out").record
    assert record["status"] == "ok" and record["world_size"] == 1
    assert record["busbw_note"] == ONE_RANK_NOTE
    assert [row["busbw_gb_s"] for row in record["rows"]] == [None, None]
    assert all(row["algbw_gb_s"] > 0 for row in record["rows"])
    names = {metric.name for metric in probe_metrics(record)}
    assert "busbw" not in names and "busbw_peak" not in names and "algbw_peak" in names
    out = io.StringIO()
    Console(file=out, width=200).print(probe_table(record, "loopback", None))
    assert out.getvalue().count("n/a (one rank)") == 2


def test_two_ranks_keep_it() -> None:
    rows = bandwidth_rows((1000,), [[1e-3], [2e-3]], 2)
    assert rows[0]["busbw_gb_s"] == pytest.approx(1000 / 2e-3 / 1e9)
    assert bandwidth_note(2) is None

"""The MPI probe stored and shown beside the other runtimes: its metrics per operation and
size, the runtimes table from stored probes, and `vgpu train mpi-probe` on this machine."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vgpu.cli import _register, app
from vgpu.errors import InputError
from vgpu.results.store.records import Metric, Platform, RunStart
from vgpu.results.store.result_store import ResultStore
from vgpu.results.views.allreduce_view import latest_per_runtime, load_probe, render_runtimes
from vgpu.train.mpi_probe import mpi_probe_metrics, sizes_up_to

MIB = 1 << 20
RECORD = {"rows": [
    {"op": "latency", "size_bytes": 1, "time_us": 20.0, "algbw_gb_s": 5e-5, "busbw_gb_s": None},
    {"op": "bandwidth", "size_bytes": MIB, "time_us": 90.0, "algbw_gb_s": 11.6,
     "busbw_gb_s": 11.6},
    {"op": "allreduce", "size_bytes": MIB, "time_us": 800.0, "algbw_gb_s": 1.3,
     "busbw_gb_s": 1.3},
    {"op": "allreduce", "size_bytes": 4 * MIB, "time_us": 3000.0, "algbw_gb_s": 1.4,
     "busbw_gb_s": 1.4},
    {"op": "bcast", "size_bytes": MIB, "time_us": 100.0, "algbw_gb_s": 10.5,
     "busbw_gb_s": 10.5},
]}


def test_quick_sizes_stop_at_the_maximum() -> None:
    assert sizes_up_to(1024) == (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def test_metrics_name_each_operation_and_allreduce_as_the_other_probes_do() -> None:
    metrics = {(m.name, m.instance): m.value for m in mpi_probe_metrics(RECORD, 25.0)}
    assert metrics[("latency_us", "1B")] == 20.0 and ("busbw", "1B") not in metrics
    assert metrics[("p2p_bw", "1MiB")] == 11.6 and metrics[("bcast_busbw", "1MiB")] == 10.5
    assert metrics[("busbw", "4MiB")] == 1.4 and metrics[("time_us", "1MiB")] == 800.0
    assert metrics[("busbw_peak", None)] == 1.4 and metrics[("busbw_avg", None)] == 1.35
    assert metrics[("busbw_link_share", None)] == pytest.approx(1.4 / (25 / 8))


def _probe(store: ResultStore, backend: str, busbw: float, sizes: list[int]) -> int:
    start = RunStart(series_id=backend, scenario_id="s", scenario_name="s",
                     workload=f"{backend}-probe", target_kind="bare-metal", kind="allreduce",
                     workload_detail={"backend": backend, "world_size": 2, "nodes": 2,
                                      "sizes_bytes": sizes},
                     platform=Platform(link_speed_gbps=10.0, rdma="none"))
    metrics = [Metric("busbw", busbw * (i + 1), "GB/s", instance=f"{s // MIB}MiB")
               for i, s in enumerate(sizes)]
    metrics += [Metric("time_us", 100.0 * (i + 1), "us", instance=f"{s // MIB}MiB")
                for i, s in enumerate(sizes)]
    return store.record_run(start, "ok", metrics=metrics)


def test_runtimes_stand_side_by_side_by_message_size(tmp_path: Path) -> None:
    with ResultStore.open(tmp_path / "results.db") as store:
        _probe(store, "gloo", 0.5, [MIB])
        gloo = _probe(store, "gloo", 0.6, [MIB, 4 * MIB])
        mpi = _probe(store, "mpi", 0.3, [MIB, 4 * MIB])
        assert latest_per_runtime(store, "s") == [gloo, mpi]
        text = render_runtimes([load_probe(store, run) for run in (gloo, mpi)])
        with pytest.raises(InputError, match="no allreduce probe of scenario 'other'"):
            latest_per_runtime(store, "other")
    lines = text.splitlines()
    assert "gloo 2r/2n" in lines[0] and "mpi 2r/2n" in lines[0]
    assert lines[3].split() == ["4MiB", "1.2000", "200.0", "0.6000", "200.0"]
    assert "link 10 Gbit/s; peak busbw 96.0% of the link" in text  # 1.2 GB/s of 1.25


@pytest.mark.mpi
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI (mpirun) is missing")
def test_cli_mpi_probe_is_stored_and_shown_beside_gloo(tmp_path: Path) -> None:
    pytest.importorskip("mpi4py", reason="the mpi extra (mpi4py) is not installed")
    _register()
    db = tmp_path / "results.db"
    result = CliRunner().invoke(app, ["train", "mpi-probe", "-s", "train_multinode_2",
                                      "--max-size", "4096", "--iterations", "5", "--db",
                                      str(db)])
    assert result.exit_code == 0, result.output
    assert "MPI probe, 2 ranks on 1 node(s), Open MPI" in result.output
    assert "no verdict (no ok run of baseline scenario train_bm_2 with workload mpi-probe" \
        in " ".join(result.output.split())
    with ResultStore.open(db) as store:
        (run,) = store.runs(scenario_id="train_multinode_2")
        names = {(m.name, m.instance) for m in store.metrics(run.id)}
    assert run.kind == "allreduce" and run.workload_detail["backend"] == "mpi"
    assert {("latency_us", "1B"), ("busbw", "4KiB"), ("allgather_busbw", "4KiB")} <= names
    shown = CliRunner().invoke(app, ["train", "runtimes", "-s", "train_multinode_2",
                                     "--db", str(db)])
    assert shown.exit_code == 0 and "mpi 2r/1n" in shown.output and "4KiB" in shown.output

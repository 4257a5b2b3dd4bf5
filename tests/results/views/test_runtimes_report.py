"""`vgpu report`'s communication runtimes: per scenario probed with more than one runtime,
allreduce busbw and time by message size, one column pair and one chart line per runtime."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vgpu.cli import _register, app
from vgpu.results.store.records import Metric, Platform, RunStart
from vgpu.results.store.result_store import ResultStore
from vgpu.results.views.allreduce_view import latest_per_runtime, load_probe
from vgpu.results.views.format import number
from vgpu.results.views.report import Chart, Table, build_report

MIB = 1 << 20


def _probe(store: ResultStore, backend: str, scenario: str, busbw: dict[int, float],
           time_us: dict[int, float]) -> int:
    """A stored probe as `vgpu train probe` / `mpi-probe` store it: busbw and time_us per
    size (the metric's instance), the link in the platform record."""
    start = RunStart(series_id=f"{backend}-{scenario}", scenario_id=scenario,
                     scenario_name=scenario, workload=f"{backend}-probe",
                     target_kind="vm", kind="allreduce",
                     workload_detail={"backend": backend, "world_size": 2, "nodes": 2,
                                      "sizes_bytes": sorted(time_us)},
                     platform=Platform(link_speed_gbps=10.0, rdma="none"))
    metrics = [Metric("busbw", value, "GB/s", instance=f"{size // MIB}MiB")
               for size, value in busbw.items()]
    metrics += [Metric("time_us", value, "us", instance=f"{size // MIB}MiB")
                for size, value in time_us.items()]
    return store.record_run(start, "ok", metrics=metrics)


def _sections(store: ResultStore) -> dict[str, Table | Chart]:
    return {heading: section for heading, section in build_report(store).sections
            if heading.startswith("Communication runtimes")}


def test_each_runtime_has_a_column_pair_per_size_and_a_line_in_the_chart(
        store: ResultStore) -> None:
    _probe(store, "gloo", "train_multinode_2", {MIB: 0.1}, {MIB: 9000.0})  # superseded
    gloo = _probe(store, "gloo", "train_multinode_2", {MIB: 0.5, 4 * MIB: 0.9},
                  {MIB: 4000.0, 4 * MIB: 9000.0})
    mpi = _probe(store, "mpi", "train_multinode_2", {MIB: 0.8, 4 * MIB: 1.1, 8 * MIB: 1.2},
                 {MIB: 2500.0, 4 * MIB: 7500.0, 8 * MIB: 14000.0})
    _probe(store, "gloo", "lonely", {MIB: 0.5}, {MIB: 4000.0})  # one runtime: not shown
    sections = _sections(store)
    where = "scenario train_multinode_2 vm"
    sizes = sections[f"Communication runtimes: allreduce by message size, {where}"]
    assert isinstance(sizes, Table)
    assert sizes.headers == ["message size", "gloo busbw GB/s", "gloo time µs",
                             "mpi busbw GB/s", "mpi time µs"]
    assert sizes.rows == [["1MiB", "0.500", "4,000", "0.800", "2,500"],
                          ["4MiB", "0.900", "9,000", "1.10", "7,500"],
                          ["8MiB", "-", "-", "1.20", "14,000"]]
    probes = sections[f"Communication runtimes: probes and links, {where}"]
    assert isinstance(probes, Table)
    assert probes.rows == [[str(gloo), "gloo", "2", "2", "10 Gbit/s", "0.900", "72.0%"],
                           [str(mpi), "mpi", "2", "2", "10 Gbit/s", "1.20", "96.0%"]]
    chart = sections[f"Communication runtimes figure: {where}"]
    assert isinstance(chart, Chart) and chart.png.startswith(b"\x89PNG")
    assert len(sections) == 3  # the scenario with one runtime has no section


def test_html_and_markdown_carry_both_runtimes(store: ResultStore) -> None:
    _probe(store, "gloo", "7", {MIB: 0.5}, {MIB: 4000.0})
    _probe(store, "mpi", "7", {MIB: 0.8}, {MIB: 2500.0})
    report = build_report(store)
    markdown = report.markdown()
    assert "| 1MiB | 0.500 | 4,000 | 0.800 | 2,500 |" in markdown
    assert "<table id='runtimes'>" in report.html()
    assert "<img alt='Communication runtimes figure: scenario 7 vm'" in report.html()


def test_a_store_with_one_runtime_has_no_runtimes_section(store: ResultStore) -> None:
    _probe(store, "mpi", "7", {MIB: 0.8}, {MIB: 2500.0})
    assert _sections(store) == {}


@pytest.mark.train
@pytest.mark.slow
@pytest.mark.mpi
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI (mpirun) is missing")
def test_real_gloo_and_mpi_probes_of_this_machine_stand_side_by_side(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the train extra (torch) is not installed")
    pytest.importorskip("mpi4py", reason="the mpi extra (mpi4py) is not installed")
    _register()
    db = str(tmp_path / "results.db")
    probes = [["train", "probe", "-s", "train_multinode_2", "--size", "65536",
               "--iterations", "2", "--db", db],
              ["train", "mpi-probe", "-s", "train_multinode_2", "--max-size", "65536",
               "--iterations", "5", "--db", db]]
    for args in probes:
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
    with ResultStore.open(Path(db)) as store:
        gloo, mpi = (load_probe(store, run_id)
                     for run_id in latest_per_runtime(store, "train_multinode_2"))
        sizes = _sections(store)[
            "Communication runtimes: allreduce by message size, scenario train_multinode_2 "
            "local"]
    assert (gloo.backend, mpi.backend) == ("gloo", "mpi")
    assert isinstance(sizes, Table)
    assert sizes.headers[1:] == ["gloo busbw GB/s", "gloo time µs", "mpi busbw GB/s",
                                 "mpi time µs"]
    (row,) = [r for r in sizes.rows if r[0] == "64KiB"]
    assert row[1:] == [number(gloo.busbw["64KiB"]), number(gloo.time_us["64KiB"]),
                       number(mpi.busbw["64KiB"]), number(mpi.time_us["64KiB"])]
    assert gloo.time_us["64KiB"] > 0 and mpi.time_us["64KiB"] > 0
    assert sizes.rows[0][:3] == ["1B", "-", "-"]  # the MPI probe starts at 1 B, Gloo not

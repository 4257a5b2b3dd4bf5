"""Telemetry in view: GPU fields from records the harness's own Telemetry sampler builds
(over the NVML simulator, as there is no GPU here), stored in SQLite and read back into the
report, the CSV/JSON export and `vgpu results --run`. A MIG slice's utilisation, which NVML
refuses, reads "not supported on a MIG slice", never 0."""

from __future__ import annotations

import csv
import io
import json
import time
import uuid
from typing import Any

import pytest
from rich.console import Console

from loadgen.spec import DeviceSpec
from loadgen.telemetry import Telemetry
from tests.labs.pynvml_simulator import PynvmlSimulator, SimulatedReadings
from vgpu.nvml.simulator import SimulatedGpuBackend
from vgpu.results.export.runs import export_csv, export_json
from vgpu.results.store.records import InstanceResult, RunStart
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import all_series
from vgpu.results.views import telemetry_view
from vgpu.results.views.report import build_report, telemetry_table
from vgpu.results.views.runview import render_run

GIB = 2**30


def _sampled(device: DeviceSpec, nvml: Any) -> dict[str, Any]:
    telemetry = Telemetry(device, nvml=nvml, interval_s=0.05)
    telemetry.start()
    time.sleep(0.3)
    return telemetry.stop()


def _mig_slice_record() -> dict[str, Any]:
    """A 1g.10gb slice of an H100 with 3 GiB used on it and the GPU drawing 250 W."""
    sim = SimulatedGpuBackend(["H100-80GB"], mig_enabled=True)
    gi = sim.create_gpu_instance(0, 19, 0, 1)
    sim.create_compute_instance(0, gi.id)
    [gpu], [mig_device] = sim.gpus(), sim.mig_devices(0)
    readings = SimulatedReadings(power_mw=250_000, memory_used={
        gpu.uuid: 9 * GIB, mig_device.uuid: 3 * GIB})
    nvml = PynvmlSimulator.started(sim, readings=readings)
    return _sampled(DeviceSpec("mig", None, mig_device.uuid), nvml)


def _whole_gpu_record() -> dict[str, Any]:
    sim = SimulatedGpuBackend(["H100-80GB"])
    [gpu] = sim.gpus()
    readings = SimulatedReadings(power_mw=310_000, memory_used={gpu.uuid: 20 * GIB})
    return _sampled(DeviceSpec("gpu", 0, None), PynvmlSimulator.started(sim, readings=readings))


@pytest.fixture(scope="module")
def records() -> dict[str, dict[str, Any]]:
    return {"mig-1g": _mig_slice_record(), "gpu-0": _whole_gpu_record()}


def _store_run(store: ResultStore, records: dict[str, dict[str, Any]]) -> int:
    start = RunStart(series_id=uuid.uuid4().hex, scenario_id="6", scenario_name="s6",
                     workload="resnet50-offline", target_kind="vm",
                     workload_detail={"loadgen_scenario": "Offline"})
    instances = [InstanceResult(
        name=name, status="ok", device_kind="mig" if name.startswith("mig") else "gpu",
        validity="VALID", throughput=1500.0, latency_ns={"p50": 11.2e6, "p99": 15.0e6},
        timed_start_unix=1000.0, timed_end_unix=1002.0,
        result={"status": "ok", "telemetry": record}) for name, record in records.items()]
    return store.record_run(start, "ok", instances=instances)


def test_readings_of_a_mig_slice_and_a_whole_gpu(
    store: ResultStore, records: dict[str, dict[str, Any]]
) -> None:
    run_id = _store_run(store, records)
    read = {s.result.name: telemetry_view.instance_telemetry(run_id, s.result)
            for s in store.instances(run_id)}
    mig, gpu = read["mig-1g"].readings, read["gpu-0"].readings
    assert mig["gpu_util"].note == "not supported on a MIG slice"
    assert mig["gpu_util"].mean is None
    assert mig["mem_used_mib"].maximum == 3 * 1024  # the slice's 3 GiB, not the GPU's 9
    assert mig["power_w"].mean == pytest.approx(250.0)  # the physical GPU's
    assert mig["sm_clock_mhz"].mean == pytest.approx(1980.0)
    assert gpu["gpu_util"].mean == pytest.approx(87.0) and gpu["gpu_util"].maximum == 87.0
    assert gpu["mem_used_mib"].mean == pytest.approx(20 * 1024)
    assert gpu["power_w"].maximum == pytest.approx(310.0)
    for reading in (mig["process_cpu_pct"], gpu["process_cpu_pct"]):
        assert reading.mean is not None and reading.maximum is not None
        assert 0.0 <= reading.mean <= reading.maximum
    samples = read["gpu-0"].series["gpu_util"]
    assert len(samples) >= 3 and {v for _t, v in samples} == {87.0}
    assert "gpu_util" not in read["mig-1g"].series
    assert read["gpu-0"].duration_s == pytest.approx(2.0)


def test_export_has_telemetry_columns_and_summary(
    store: ResultStore, records: dict[str, dict[str, Any]]
) -> None:
    run_id = _store_run(store, records)
    rows = {r["instance"]: r for r in csv.DictReader(io.StringIO(
        export_csv(store, store.runs())))}
    mig, gpu = rows["mig-1g"], rows["gpu-0"]
    assert mig["gpu_util_mean"] == "" and mig["gpu_util_max"] == ""
    assert mig["telemetry_notes"] == "gpu_util: not supported on a MIG slice"
    assert float(mig["mem_used_mib_max"]) == 3072.0
    assert float(mig["power_w_mean"]) == pytest.approx(250.0)
    assert float(gpu["gpu_util_mean"]) == 87.0 and float(gpu["gpu_util_max"]) == 87.0
    assert float(gpu["sm_clock_mhz_mean"]) == pytest.approx(1980.0)
    assert float(gpu["process_cpu_pct_mean"]) == pytest.approx(
        records["gpu-0"]["host"]["process_cpu_percent_mean"])
    assert gpu["telemetry_notes"] == ""
    [run] = json.loads(export_json(store, store.runs()))
    assert run["id"] == run_id
    summary = {i["name"]: i["telemetry_summary"] for i in run["instances"]}
    assert summary["mig-1g"]["gpu_util"] == {
        "mean": None, "max": None, "unit": "%", "note": "not supported on a MIG slice"}
    assert summary["gpu-0"]["power_w"]["max"] == pytest.approx(310.0)


def test_report_and_run_view_say_not_supported_in_words(
    store: ResultStore, records: dict[str, dict[str, Any]]
) -> None:
    run_id = _store_run(store, records)
    table = telemetry_table(all_series(store))
    rows = {row[1]: row for row in table.rows}
    headers = table.headers
    mig, gpu = rows["mig-1g"], rows["gpu-0"]
    assert mig[headers.index("GPU util % (mean / max)")] == "not supported on a MIG slice"
    assert gpu[headers.index("GPU util % (mean / max)")] == "87.0 / 87.0"
    assert mig[headers.index("memory used MiB (mean / max)")] == "3,072 / 3,072"
    assert gpu[headers.index("power W (mean / max)")] == "310 / 310"
    assert gpu[headers.index("SM clock MHz (mean)")] == "1,980"
    report = build_report(store)
    assert any(h.startswith("Telemetry over time") for h, _chart in report.charts)
    console = Console(record=True, width=200)
    render_run(store, run_id, console)
    text = console.export_text()
    assert "not supported on a MIG slice" in text and "87.0 / 87.0" in text
    assert "11.2 ms" in text and "15.0 ms" in text and "1,500" in text

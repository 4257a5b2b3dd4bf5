"""Telemetry: NVML facts and samples (through PynvmlSimulator over the GPU simulator, as
there is no GPU here), the real pynvml failing cleanly without a driver, and process CPU/RSS
sampling."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from loadgen import telemetry
from loadgen.runner import run
from loadgen.spec import DeviceSpec, parse_spec
from loadgen.telemetry import HostLoad, ProcessSampler, Telemetry
from tests.labs.cpuhog import other_process_hog
from tests.labs.pynvml_simulator import DRIVER_VERSION, PynvmlSimulator, SimulatedReadings
from tests.loadgen.harness_helpers import base_spec
from vgpu.nvml.simulator import SimulatedGpuBackend
from vgpu.results.store.disturbance import LIMITS, OTHER_CPU

GPU_NAME = "NVIDIA H100 80GB"


def h100() -> PynvmlSimulator:
    """One H100, MIG off."""
    return PynvmlSimulator.started(SimulatedGpuBackend(["H100-80GB"]))


def h100_with_a_1g_slice(power_mw: int) -> tuple[PynvmlSimulator, str]:
    """One H100 with MIG on and one 1g.10gb MIG device: 9 GiB used on the GPU, 3 on the
    slice. Returns the pynvml simulator and the slice's UUID."""
    sim = SimulatedGpuBackend(["H100-80GB"], mig_enabled=True)
    gi = sim.create_gpu_instance(0, 19, 0, 1)
    sim.create_compute_instance(0, gi.id)
    [gpu], [mig_device] = sim.gpus(), sim.mig_devices(0)
    readings = SimulatedReadings(power_mw=power_mw, memory_used={
        gpu.uuid: 9 * 2**30, mig_device.uuid: 3 * 2**30})
    return PynvmlSimulator.started(sim, readings=readings), mig_device.uuid


def sampled(device: DeviceSpec, nvml: object, seconds: float = 0.3) -> dict:
    telemetry = Telemetry(device, nvml=nvml, interval_s=0.05)
    telemetry.start()
    time.sleep(seconds)
    return telemetry.stop()


def test_mig_slice_facts_and_unsupported_utilisation() -> None:
    nvml, mig_uuid = h100_with_a_1g_slice(power_mw=250_000)
    record = sampled(DeviceSpec("mig", None, mig_uuid), nvml)
    gpu = record["gpu"]
    assert record["nvml"] == {"available": True}
    assert (gpu["is_mig"], gpu["mig_profile"], gpu["mig_uuid"]) == (True, "1g.10gb", mig_uuid)
    assert gpu["parent_name"] == GPU_NAME
    assert (gpu["driver_version"], gpu["cuda_driver_version"]) == (DRIVER_VERSION, "12.4")
    assert gpu["unsupported"] == {"gpu_utilization_percent": "Not Supported",
                                  "memory_utilization_percent": "Not Supported"}
    metrics = gpu["metrics"]
    assert set(metrics) == {"memory_used_bytes", "power_w", "sm_clock_mhz", "memory_clock_mhz",
                            "other_processes", "clocks_throttle_reasons"}
    assert metrics["other_processes"]["max"] == 0.0  # nothing else on the slice
    assert metrics["clocks_throttle_reasons"]["max"] == 0.0
    assert metrics["memory_used_bytes"]["max"] == 3 * 2**30  # the slice's, not the GPU's
    assert metrics["power_w"]["mean"] == pytest.approx(250.0)  # the physical GPU's
    assert metrics["sm_clock_mhz"]["count"] >= 3
    assert len(metrics["power_w"]["samples"]) == metrics["power_w"]["count"]


def test_whole_gpu_samples_utilisation() -> None:
    record = sampled(DeviceSpec("gpu", 0, None), h100())
    gpu = record["gpu"]
    assert gpu["is_mig"] is False and gpu["mig_profile"] is None
    assert gpu["unsupported"] == {}
    assert gpu["metrics"]["gpu_utilization_percent"]["mean"] == 87.0


def test_unknown_uuid_is_reported_not_raised() -> None:
    record = sampled(DeviceSpec("mig", None, "MIG-does-not-exist"), h100(), 0.1)
    assert record["nvml"]["available"] is False
    assert "Not Found" in record["nvml"]["reason"]
    assert record["gpu"] is None


def test_real_pynvml_without_a_driver_says_why() -> None:
    pynvml = pytest.importorskip("pynvml")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:
        pytest.skip("gpu: this machine has an NVIDIA driver")
    record = sampled(DeviceSpec("gpu", 0, None), None, 0.1)
    assert record["nvml"]["available"] is False
    assert record["nvml"]["reason"].startswith("nvmlInit failed:")


def test_cpu_runs_never_touch_nvml() -> None:
    simulator = PynvmlSimulator(SimulatedGpuBackend(["H100-80GB"]))
    record = sampled(DeviceSpec("cpu", None, None), simulator, 0.1)
    assert record["gpu"] is None and simulator.calls == []
    host = record["host"]
    assert host["cpu_count"] >= 1 and host["process_rss_bytes_max"] > 10 * 2**20


def _burn(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_proc_fallback_agrees_with_psutil(monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as patch:
        patch.setitem(sys.modules, "psutil", None)  # import psutil -> ImportError
        fallback = ProcessSampler()
    assert fallback.source == "/proc"
    # /proc/self's CPU seconds are this process's own CPU clock, however busy the host
    proc_before, own_before = fallback._proc_cpu_seconds(), time.process_time()
    _burn(0.3)
    proc_used = fallback._proc_cpu_seconds() - proc_before
    assert proc_used == pytest.approx(time.process_time() - own_before, abs=0.05)
    _cpu, rss = fallback.sample()
    assert rss == pytest.approx(psutil.Process().memory_info().rss, rel=0.1)


def test_proc_fallback_cpu_percent_is_cpu_seconds_over_the_interval(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What the process got of a core between two samples, on a virtual clock: 0.2 CPU
    seconds in 0.5 s is 40 %; a second sample at the same instant has no interval."""
    clock, cpu_seconds = iter([100.0, 100.5, 100.5]), iter([10.0, 10.2, 10.2])
    monkeypatch.setitem(sys.modules, "psutil", None)
    monkeypatch.setattr(telemetry, "time", SimpleNamespace(monotonic=lambda: next(clock)))
    monkeypatch.setattr(ProcessSampler, "_proc_cpu_seconds",
                        staticmethod(lambda: next(cpu_seconds)))
    sampler = ProcessSampler()
    assert sampler.sample()[0] == pytest.approx(40.0)
    assert sampler.sample()[0] == 0.0


def test_mig_backed_vgpu_guest_samples_its_mig_device() -> None:
    sim = SimulatedGpuBackend.mig_backed_vgpu_guest(["A100D-2-20C"])
    [mig_device] = sim.mig_devices(0)
    record = sampled(DeviceSpec("mig", None, mig_device.uuid), PynvmlSimulator.started(sim))
    gpu = record["gpu"]
    assert (gpu["is_mig"], gpu["mig_profile"], gpu["mig_uuid"]) == (
        True, "2g.20gb", mig_device.uuid)
    assert gpu["parent_name"] == "GRID A100D-2-20C"


def test_a_cpu_hog_during_a_real_harness_run_is_seen(model_cache: Path, tmp_path: Path) -> None:
    """A tiny resnet50 Offline run on the CPU while busy loops (one per core) run beside
    it: the record's host load counts their CPU as other processes', beyond the limit
    that marks a run disturbed; the harness's own CPU is not in it."""
    hogs = [other_process_hog() for _ in range(os.cpu_count() or 1)]
    try:
        time.sleep(0.3)
        doc = base_spec(model_cache)
        doc["loadgen"]["min_duration_ms"] = 1500
        record = run(parse_spec(doc, "spec.json", tmp_path), tmp_path / "out")
    finally:
        for pid in hogs:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    load = record["telemetry"]["host"]["load"]
    # an Offline run lasts as long as this machine takes for its queries: no fixed wall
    assert load["available"] and load["wall_s"] > 0.0
    assert load["own_cpu_s"] > 0.0  # the harness itself ran
    assert 100 * load["other_cpu_share"] > LIMITS[OTHER_CPU]
    assert load["busy_cpu_s"] >= load["own_cpu_s"]


def test_host_load_counts_a_child_as_its_own() -> None:
    """A busy child of the sampling process (reaped before the end) is its own tree's
    CPU, not another process's."""
    load = HostLoad()
    load.start()
    busy = "import time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass"
    subprocess.run([sys.executable, "-c", busy], check=True, timeout=60)
    record = load.stop()
    assert record["available"]
    assert record["own_cpu_s"] >= 0.5
    assert 0.0 <= record["other_cpu_share"] <= 1.0

"""Telemetry: NVML facts and samples (through the NVML SIMULATOR, as there is no GPU here),
the real pynvml failing cleanly without a driver, and process CPU/RSS sampling."""

from __future__ import annotations

import sys
import time

import psutil
import pytest

from loadgen.spec import DeviceSpec
from loadgen.telemetry import ProcessSampler, Telemetry
from tests.loadgen.nvml_simulator import GPU_NAME, MIG_UUID, NvmlSimulator


def sampled(device: DeviceSpec, nvml: object, seconds: float = 0.3) -> dict:
    telemetry = Telemetry(device, nvml=nvml, interval_s=0.05)
    telemetry.start()
    time.sleep(seconds)
    return telemetry.stop()


def test_mig_slice_facts_and_unsupported_utilisation() -> None:
    record = sampled(DeviceSpec("mig", None, MIG_UUID), NvmlSimulator(power_mw=250_000))
    gpu = record["gpu"]
    assert record["nvml"] == {"available": True}
    assert (gpu["is_mig"], gpu["mig_profile"], gpu["mig_uuid"]) == (True, "1g.10gb", MIG_UUID)
    assert gpu["parent_name"] == GPU_NAME
    assert (gpu["driver_version"], gpu["cuda_driver_version"]) == ("550.90.07", "12.4")
    assert gpu["unsupported"] == {"gpu_utilization_percent": "Not Supported",
                                  "memory_utilization_percent": "Not Supported"}
    metrics = gpu["metrics"]
    assert set(metrics) == {"memory_used_bytes", "power_w", "sm_clock_mhz", "memory_clock_mhz"}
    assert metrics["memory_used_bytes"]["max"] == 3 * 2**30  # the slice's, not the GPU's
    assert metrics["power_w"]["mean"] == pytest.approx(250.0)  # the physical GPU's
    assert metrics["sm_clock_mhz"]["count"] >= 3
    assert len(metrics["power_w"]["samples"]) == metrics["power_w"]["count"]


def test_whole_gpu_samples_utilisation() -> None:
    record = sampled(DeviceSpec("gpu", 0, None), NvmlSimulator())
    gpu = record["gpu"]
    assert gpu["is_mig"] is False and gpu["mig_profile"] is None
    assert gpu["unsupported"] == {}
    assert gpu["metrics"]["gpu_utilization_percent"]["mean"] == 87.0


def test_unknown_uuid_is_reported_not_raised() -> None:
    record = sampled(DeviceSpec("mig", None, "MIG-does-not-exist"), NvmlSimulator(), 0.1)
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
    simulator = NvmlSimulator()
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
    wall, process = time.monotonic(), time.process_time()
    _burn(0.3)
    cpu, rss = fallback.sample()
    # What this process really got of a core meanwhile (less than 100 % on a busy host).
    expected = 100 * (time.process_time() - process) / (time.monotonic() - wall)
    assert cpu == pytest.approx(expected, abs=15)
    assert cpu > 10
    assert rss == pytest.approx(psutil.Process().memory_info().rss, rel=0.1)

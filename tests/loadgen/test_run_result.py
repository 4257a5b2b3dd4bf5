"""The harness's result record read as a typed run result (loadgen.run_result, through
loadgen.contract): every field the orchestrator reads, metrics_of's names, and a clear
error naming the field of a bad record."""

from __future__ import annotations

import re
from typing import Any

import pytest

from loadgen.contract import (
    EMPTY_RESULT,
    ResultRecordError,
    metric_unit,
    metrics_of,
    parse_run_result,
)


def _record() -> dict[str, Any]:
    return {
        "schema_version": 1, "harness_version": "1.0.0", "status": "ok", "reason": None,
        "scenario": "Server", "mode": "PerformanceOnly",
        "throughput": {"samples_per_second": 812},
        "latency_ns": {"p50": 1_000_000, "p99": 2_500_000.0, "p99.9": 3e6, "min": 5e5},
        "validity": {"result": "INVALID", "reasons": ["min duration not met"],
                     "min_duration_met": False},
        "device": {"kind": "mig", "note": "MIG 1g.18gb on H200", "gpu_name": "H200",
                   "mig_profile": "1g.18gb", "mig_uuid": "MIG-1", "execution_provider": "CUDA"},
        "telemetry": {"gpu": {"name": "MIG 1g", "parent_name": "NVIDIA H200",
                              "driver_version": "570.1", "cuda_driver_version": "12.8"},
                      "host": {"load": {"available": True}}},
        "software": {"onnxruntime": {"package": "onnxruntime-gpu", "version": "1.20",
                                     "cuda_version": 12.4, "tensorrt_version": ""},
                     "torch": {"cuda": "12.1", "cudnn": 90100}},
        "timed_start_unix": 100, "timed_end_unix": 110.5,
        "sut": {"completions": {"unix": [100.0, 105.0, 110.0], "samples": [0, 40, 80]}},
        "stability": {"windows_samples_per_s": [790.0, 805.5], "stable": True,
                      "spread_pct": 1.9},
        "tokens": {"output_token_throughput": 2400.0,
                   "time_to_first_token_ms": {"p50": 12.0, "p99": 40.0, "source": "clock"},
                   "inter_token_latency_ms": {"p50": 1.5, "p99": 2.0}},
        "backend": {"server_statistics": {"timed_run": {"queue": {"mean_us": 30},
                                                        "compute_infer": {"mean_us": 410.5}}}},
        "capacity": {"found_qps": 90.0},
    }


def test_every_field_read_comes_typed() -> None:
    result = parse_run_result(_record())
    assert (result.status, result.harness_version, result.scenario) == ("ok", "1.0.0", "Server")
    assert result.throughput == 812.0 and isinstance(result.throughput, float)
    assert result.latency_ns == {"p50": 1e6, "p99": 2.5e6, "p99_9": 3e6, "min": 5e5}
    assert result.validity is not None
    assert (result.validity.result, result.validity.reasons,
            result.validity.min_duration_met) == ("INVALID", ("min duration not met",), False)
    assert (result.device.kind, result.device.mig_profile, result.device.execution_provider) \
        == ("mig", "1g.18gb", "CUDA")
    assert (result.gpu.parent_name, result.gpu.driver_version) == ("NVIDIA H200", "570.1")
    # the runtime's build first, torch's where onnxruntime gave none; "" is none
    assert (result.software.cuda_version, result.software.cudnn_version,
            result.software.tensorrt_version) == ("12.4", "90100", None)
    assert (result.timed_start_unix, result.timed_end_unix) == (100.0, 110.5)
    assert result.completions is not None and result.completions.samples == (0.0, 40.0, 80.0)
    assert result.capacity == {"found_qps": 90.0}
    assert result.raw["status"] == "ok"  # what the store keeps, as written


def test_metrics_of_names_every_metric_with_its_unit() -> None:
    metrics = metrics_of(parse_run_result(_record()))
    assert metrics == {
        "throughput": 812.0,
        "latency_ns_p50": 1e6, "latency_ns_p99": 2.5e6, "latency_ns_p99_9": 3e6,
        "latency_ns_min": 5e5,
        "output_token_throughput": 2400.0,
        "time_to_first_token_p50": 12.0, "time_to_first_token_p99": 40.0,
        "inter_token_latency_p50": 1.5, "inter_token_latency_p99": 2.0,
        "triton_queue_us": 30.0, "triton_compute_infer_us": 410.5,
        "warmup_window_1": 790.0, "warmup_window_2": 805.5,
        "warmup_stable": 1.0, "warmup_spread_pct": 1.9,
    }
    units = {name: metric_unit(name) for name in metrics}
    assert units["throughput"] == "samples/s" and units["latency_ns_p99"] == "ns"
    assert units["time_to_first_token_p99"] == "ms" and units["triton_queue_us"] == "us"
    assert units["warmup_window_2"] == "samples/s" and units["warmup_spread_pct"] == "%"


def test_offline_has_no_first_token_metric() -> None:
    metrics = metrics_of(parse_run_result({**_record(), "scenario": "Offline"}))
    assert not any(name.startswith("time_to_first_token") for name in metrics)
    assert metrics["inter_token_latency_p99"] == 2.0


def test_an_old_or_empty_record_reads_with_nothing_measured() -> None:
    old = {"schema_version": 1, "status": "ok", "throughput": {"samples_per_second": 50.0},
           "latency_ns": {"p99": 1e6}}  # written before stability, tokens, software, sut
    result = parse_run_result(old)
    assert result.throughput == 50.0 and result.stability is None and not result.has_tokens
    assert metrics_of(result) == {"throughput": 50.0, "latency_ns_p99": 1e6}
    assert metrics_of(EMPTY_RESULT) == {} and EMPTY_RESULT.validity is None


@pytest.mark.parametrize(("change", "field"), [
    ({"throughput": {"samples_per_second": "fast"}}, "throughput.samples_per_second"),
    ({"throughput": [1.0]}, "throughput: list is not an object"),
    ({"latency_ns": {"p99": True}}, "latency_ns.p99"),
    ({"status": 1}, "status"),
    ({"validity": {"result": "VALID", "reasons": "late"}}, "validity.reasons"),
    ({"sut": {"completions": {"unix": [1.0, "x"], "samples": [0, 1]}}},
     "sut.completions.unix[1]"),
    ({"sut": {"completions": {"unix": [1.0, 2.0], "samples": [0]}}}, "sut.completions"),
    ({"tokens": {"time_to_first_token_ms": {"p99": "slow"}}},
     "tokens.time_to_first_token_ms.p99"),
    ({"device": {"kind": ["gpu"]}}, "device.kind"),
])
def test_a_bad_record_is_refused_naming_its_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(ResultRecordError, match="^" + re.escape(field)):
        parse_run_result({**_record(), **change})


def test_a_record_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(ResultRecordError, match="not an object"):
        parse_run_result([1, 2])  # type: ignore[arg-type]

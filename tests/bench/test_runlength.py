"""Run length on a GPU (vgpu.bench.runlength, pure; the workload's sizing): from the
probe's completion timeline, not MLPerf's 600 s, which --mlperf-rules and an explicit
duration keep."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from loadgen.contract import RunResult, parse_run_result
from vgpu.bench.runlength import (
    GPU_MAX_RUN_S,
    GPU_MIN_RUN_S,
    GPU_UNPROBED_RUN_S,
    TARGET_NOISE_PCT,
    gpu_run_seconds,
    window_rates,
)
from vgpu.bench.workload import BenchOverrides, effective_workload
from vgpu.model.scenario import InferenceWorkload


def _parsed(records: dict[str, dict[str, Any]]) -> dict[str, RunResult]:
    return {name: parse_run_result(record) for name, record in records.items()}


def timeline(rates: list[float], window_s: float, batch: int = 8,
             start: float = 1000.0) -> dict[str, list[float]]:
    """Completions batch by batch at ``rates[k]`` samples/s in window k."""
    unix, samples, now, done = [start], [0.0], start, 0
    for rate in rates:
        end = now + window_s
        step = batch / rate
        while now + step <= end + 1e-9:
            now += step
            done += batch
            unix.append(now)
            samples.append(float(done))
        now = end
    return {"unix": unix, "samples": samples}


def record(rates: list[float], window_s: float) -> dict[str, Any]:
    return {"sut": {"completions": timeline(rates, window_s)}}


def test_window_rates_read_the_timeline_back() -> None:
    # 1,600 samples at 800/s, then 800 at 400/s: 6 spans of 400 samples each
    got = window_rates(timeline([800.0] * 4 + [400.0] * 4, 0.5), windows=6)
    assert got == pytest.approx([800.0] * 4 + [400.0] * 2, rel=0.03)
    assert window_rates({"unix": [1.0], "samples": [0.0]}) == []
    assert window_rates(timeline([800.0], 0.01)) == []  # too few completions per window


def test_a_steady_device_reads_steady_with_few_batches_per_window() -> None:
    # 1,600/s in batches of 64 for 2 s: 50 completions, about 6 a window. Windows of
    # equal time would cut batches (one more or fewer: +-17%); spans between completions
    # read the device's rate exactly.
    steady = timeline([1600.0], 2.0, batch=64)
    assert window_rates(steady) == pytest.approx([1600.0] * 8, rel=1e-6)
    length = gpu_run_seconds(_parsed({"a": {"sut": {"completions": steady}}}), upper_s=600)
    assert length.seconds == GPU_MIN_RUN_S and length.noise_pct == pytest.approx(0, abs=1e-6)


def test_a_steady_gpu_runs_the_shortest_length() -> None:
    length = gpu_run_seconds(_parsed({"a": record([16_000.0] * 8, 0.25)}), upper_s=600)
    assert length.seconds == GPU_MIN_RUN_S
    assert length.noise_pct is not None and length.noise_pct < TARGET_NOISE_PCT


def test_noise_lengthens_the_run_as_one_over_its_square_root() -> None:
    rng = np.random.default_rng(4)
    wobbly = list(800.0 * (1 + 0.02 * rng.standard_normal(8)))
    probes = _parsed({"a": record([16_000.0] * 8, 0.25), "b": record(wobbly, 0.5)})
    length = gpu_run_seconds(probes, upper_s=600)
    assert length.noise_pct is not None and length.window_s is not None
    expected = length.window_s * (length.noise_pct / TARGET_NOISE_PCT) ** 2
    assert length.seconds == min(GPU_MAX_RUN_S, max(GPU_MIN_RUN_S, np.ceil(expected)))
    assert GPU_MIN_RUN_S < length.seconds <= GPU_MAX_RUN_S
    assert "varied" in length.reason
    capped = gpu_run_seconds(_parsed({"b": record([800.0, 400.0] * 4, 0.5)}), upper_s=45)
    assert capped.seconds == 45  # the workload's own duration bounds it


def test_without_a_usable_timeline_the_upper_bound_is_kept() -> None:
    length = gpu_run_seconds(_parsed({"a": {"sut": {}}}), upper_s=600)
    assert (length.seconds, length.noise_pct) == (GPU_MAX_RUN_S, None)


def _resnet(**fields: object) -> InferenceWorkload:
    return InferenceWorkload(model="resnet50", scenario="Offline", batch=64, precision="fp16",
                             **fields)


def test_a_gpu_workload_without_a_duration_is_sized_by_stability() -> None:
    sized = effective_workload(_resnet(), on_cpu=False, overrides=BenchOverrides())
    assert sized.sized_by_stability and sized.duration_upper_s == 600
    assert sized.duration_s == GPU_UNPROBED_RUN_S
    assert any("follows the rate's stability" in n and "--mlperf-rules" in n
               for n in sized.notes)
    for kept in (effective_workload(_resnet(duration_s=600), on_cpu=False,
                                    overrides=BenchOverrides()),
                 effective_workload(_resnet(), on_cpu=False,
                                    overrides=BenchOverrides(mlperf_rules=True)),
                 effective_workload(_resnet(), on_cpu=False,
                                    overrides=BenchOverrides(duration_s=5))):
        assert not kept.sized_by_stability
    assert not effective_workload(_resnet(), on_cpu=True,
                                  overrides=BenchOverrides()).sized_by_stability


def test_the_probe_is_sized_for_a_gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    from vgpu.bench import calibrate
    from vgpu.bench.fanout import InstanceOutcome, RoundResult
    from vgpu.remote.local import LocalTransport
    from vgpu.targets.target import Target

    asked: list[int] = []

    def fake_round(targets: Any, specs: dict[str, Any], *args: Any, **kw: Any) -> RoundResult:
        asked.extend(spec["loadgen"]["min_query_count"] for spec in specs.values())
        return RoundResult([InstanceOutcome(t, tmp_path, 0, {
            "throughput": {"samples_per_second": 16_000.0},
            "sut": {"completions": timeline([16_000.0] * 8, 0.1)}}) for t in targets])

    monkeypatch.setattr(calibrate, "run_round", fake_round)

    def target(kind: str) -> Target:
        return Target(instance=f"i-{kind}", transport=LocalTransport(),
                      harness="python -m loadgen", work_root=str(tmp_path),
                      device={"kind": kind}, device_label=kind, target_kind="local")

    workload = effective_workload(_resnet(), on_cpu=False, overrides=BenchOverrides())
    gpu = calibrate.probe_offline([target("gpu")], workload, lambda n, i: tmp_path)
    assert asked == [calibrate.GPU_FIRST_PROBE_BATCHES * 64]  # one probe: 12,800 samples
    assert (gpu.probes, gpu.headroom) == (1, calibrate.GPU_HEADROOM)
    assert gpu.expected_qps == {"i-gpu": pytest.approx(16_000.0 * calibrate.GPU_HEADROOM)}
    assert gpu_run_seconds(gpu.results, 600).seconds == GPU_MIN_RUN_S
    asked.clear()
    on_cpu = effective_workload(_resnet(), on_cpu=True, overrides=BenchOverrides())
    cpu = calibrate.probe_offline([target("cpu")], on_cpu, lambda n, i: tmp_path)
    assert asked[0] == 128 and cpu.probes == 2 and cpu.headroom == calibrate.HEADROOM
    # a simulated GPU: the CPU's short first probe, but enough batches to read its
    # timeline, and a GPU's headroom
    asked.clear()
    paced = effective_workload(_resnet(), on_cpu=True,
                               overrides=BenchOverrides(simulated_gpu=True))
    assert paced.sized_by_stability and paced.variant == "tiny"
    simulated = calibrate.probe_offline([target("cpu")], paced, lambda n, i: tmp_path)
    assert asked[0] == calibrate.STABILITY_PROBE_BATCHES * 64 == 17 * 64
    assert simulated.headroom == calibrate.GPU_HEADROOM


def test_late_timestamps_alone_do_not_lengthen_the_run() -> None:
    """A steady device whose completions are stamped up to 4 ms late (a busy host's
    wake-ups): the spans' spread is the stamps', which does not add up over a run."""
    rng = np.random.default_rng(7)
    steady = timeline([500.0], 2.0, batch=32)
    stamped = {"unix": [t + abs(rng.normal(0, 0.004)) for t in steady["unix"]],
               "samples": steady["samples"]}
    rates = window_rates(stamped)
    assert np.std(rates) / np.mean(rates) > 0.005  # what the spans alone would read
    length = gpu_run_seconds(_parsed({"a": {"sut": {"completions": stamped}}}), upper_s=600)
    assert length.seconds == GPU_MIN_RUN_S
    assert length.noise_pct is not None and length.noise_pct < TARGET_NOISE_PCT

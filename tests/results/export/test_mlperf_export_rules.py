"""The MLPerf rules behind `vgpu bench --mlperf-rules`: the harness spec carries them and
the real LoadGen TestSettings take the official values of its built-in mlperf.conf."""

from __future__ import annotations

import mlperf_loadgen as lg
import pytest

from loadgen.contract import InferenceRunSpec, LoadgenSpec, ModelSpec
from loadgen.errors import SpecError
from loadgen.rules import mlperf_settings, ruled_spec, rules_record
from loadgen.spec import parse_spec
from vgpu.bench.workload import BenchOverrides, effective_workload, harness_spec
from vgpu.model.load import load_scenario
from vgpu.model.scenario import InferenceWorkload

SCENARIO = "scenarios/bm_mig_1x1g.yaml"


def _resnet(scenario: str = "Offline", shorter: int | None = None) -> InferenceRunSpec:
    return InferenceRunSpec(
        model=ModelSpec("resnet50", "tiny", "fp32"),
        loadgen=LoadgenSpec(scenario=scenario, min_duration_ms=1000, target_qps=500.0,
                            target_latency_ms=40.0, mlperf_rules=True,
                            mlperf_min_duration_ms=shorter))


def test_the_spec_round_trips_and_rejects_a_shorter_duration_without_rules() -> None:
    spec = _resnet(shorter=2000)
    parsed = parse_spec(spec.to_json())
    assert parsed.loadgen.mlperf_rules is True
    assert parsed.loadgen.mlperf_min_duration_ms == 2000
    plain = InferenceRunSpec(model=ModelSpec("resnet50", "tiny")).to_json()
    assert "mlperf_rules" not in plain["loadgen"]  # specs without the rules are unchanged
    plain["loadgen"]["mlperf_min_duration_ms"] = 2000
    with pytest.raises(SpecError, match=r"loadgen\.mlperf_min_duration_ms"):
        parse_spec(plain)
    plain["loadgen"]["mlperf_rules"] = "yes"
    with pytest.raises(SpecError, match="must be true or false"):
        parse_spec(plain)


@pytest.mark.parametrize(("scenario", "min_queries", "latency_ns"), [
    ("Offline", 24576, None), ("Server", 100, 15_000_000), ("SingleStream", 100, None)])
def test_loadgen_settings_take_the_official_values(scenario: str, min_queries: int,
                                                   latency_ns: int | None) -> None:
    spec = ruled_spec(_resnet(scenario))
    assert spec.loadgen.performance_sample_count == 1024  # resnet50's in mlperf.conf
    settings = mlperf_settings(spec, spec.loadgen.performance_sample_count)
    assert settings.min_duration_ms == 600000
    assert settings.min_query_count == min_queries
    assert settings.qsl_rng_seed == 2085463073848966840
    assert settings.schedule_rng_seed == 16159082839903944936
    assert settings.offline_expected_qps == 500.0  # user.conf-level, kept
    if latency_ns is not None:  # a rule: the spec's 40 ms does not replace it
        assert settings.server_target_latency_ns == latency_ns
    else:
        assert settings.single_stream_expected_latency_ns == 40_000_000
    assert settings.mode == lg.TestMode.PerformanceOnly


def test_a_shortened_rules_run_is_recorded_as_not_compliant() -> None:
    spec = ruled_spec(_resnet(shorter=1000))
    record = rules_record(spec, spec.loadgen.performance_sample_count)
    assert record is not None
    assert record["deviations"] == {"min_duration_ms": 1000}
    assert record["compliant_settings"] is False
    full = ruled_spec(_resnet())
    assert rules_record(full, 1024)["compliant_settings"] is True  # type: ignore[index]
    assert rules_record(InferenceRunSpec(model=ModelSpec("resnet50")), 256) is None


def test_bench_overrides_put_the_rules_into_real_runs_only() -> None:
    [workload] = [w for w in load_scenario(SCENARIO).workloads
                  if isinstance(w, InferenceWorkload) and w.label == "resnet50-offline"]
    effective = effective_workload(workload, True, BenchOverrides(mlperf_rules=True))
    assert effective.duration_s == 600  # the rules' minimum, also on a CPU
    assert effective.key.endswith(", MLPerf rules)")
    assert effective.detail()["mlperf_rules"]["compliant"] is True
    run = harness_spec(effective, instance="a", device={"kind": "cpu"}, threads=1)
    assert run.loadgen.mlperf_rules and run.loadgen.mlperf_min_duration_ms is None
    probe = harness_spec(effective, instance="a", device={"kind": "cpu"}, threads=1,
                         accuracy=False)
    assert not probe.loadgen.mlperf_rules
    shorter = effective_workload(workload, True, BenchOverrides(duration_s=2,
                                                                mlperf_rules=True))
    spec = harness_spec(shorter, instance="a", device={"kind": "cpu"}, threads=1)
    assert spec.loadgen.mlperf_min_duration_ms == 2000
    assert any("not a compliant run" in note for note in shorter.notes)

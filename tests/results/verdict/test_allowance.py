"""The allowance for the candidate's disturbed runs (vgpu.results.verdict.allowance)."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from tests.results.series import Repeat, instance, record_series
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import load_series
from vgpu.results.verdict.allowance import (
    ALLOWANCE_CONFIDENCE,
    DEFAULT_SLOWDOWN_PCT,
    _binomial_cdf,
    _values,
    allowance,
    check_shortfall,
    holds_with,
    narrowed,
    share_upper_bound,
    slowdown_seen,
)
from vgpu.results.verdict.capacity_checks import instance_checks
from vgpu.results.verdict.compare import Band, compare_paired


def test_the_share_bound_of_none_seen_is_the_closed_form() -> None:
    for blocks in (4, 10, 40):
        assert share_upper_bound(0, blocks) == pytest.approx(
            1.0 - (1.0 - ALLOWANCE_CONFIDENCE) ** (1.0 / blocks))
    # none in 40 at 70%: about 3%; at 97.5%: about 9%
    assert share_upper_bound(0, 40) == pytest.approx(0.0297, abs=5e-4)
    assert share_upper_bound(0, 40, 0.975) == pytest.approx(0.0881, abs=5e-4)


def test_the_share_bound_is_clopper_pearson() -> None:
    for disturbed, blocks in ((1, 10), (3, 43), (8, 48)):
        bound = share_upper_bound(disturbed, blocks)
        assert disturbed / blocks < bound < 1.0
        # seeing that few or fewer at the bound has probability 1 - confidence
        assert _binomial_cdf(disturbed, blocks, bound) == pytest.approx(
            1.0 - ALLOWANCE_CONFIDENCE, abs=1e-6)
    assert share_upper_bound(2, 40) < share_upper_bound(3, 40) < share_upper_bound(3, 30)
    assert share_upper_bound(5, 5) == 1.0 and share_upper_bound(0, 0) == 1.0


def test_the_slowdown_is_seen_in_the_direction_that_hurts() -> None:
    clean, slow = [1000.0, 1002.0, 998.0], [900.0]
    assert slowdown_seen(clean, slow, Band(lower_pct=-2.0)) == pytest.approx(
        -100.0 * math.log(0.9), abs=0.01)
    # a faster disturbed run does not help a throughput check
    assert slowdown_seen(clean, [1100.0], Band(lower_pct=-2.0)) == 0.0
    # latency: the disturbed run's higher p99 hurts
    assert slowdown_seen([20.0, 20.0], [22.0], Band(upper_pct=5.0)) == pytest.approx(
        100.0 * math.log(1.1))
    assert slowdown_seen(clean, [], Band(lower_pct=-2.0)) is None


def test_the_allowance_is_the_share_bound_times_the_slowdown() -> None:
    default = -100.0 * math.log1p(-DEFAULT_SLOWDOWN_PCT / 100.0)
    assert allowance(0, 40, None) == pytest.approx(share_upper_bound(0, 40) * default)
    # none seen: the default slowdown, whatever is passed
    assert allowance(0, 40, 3.0) == allowance(0, 40, None)
    assert allowance(2, 40, 5.0) == pytest.approx(share_upper_bound(2, 40) * 5.0)
    # it shrinks as blocks grow
    assert allowance(0, 40, None) < allowance(0, 20, None) < allowance(0, 10, None)


def test_a_pass_holds_only_inside_the_narrowed_band() -> None:
    rng = random.Random(3)
    reference = [1000.0 * math.exp(rng.gauss(0.0, 0.012)) for _ in range(40)]
    candidate = [r * 1.006 * math.exp(rng.gauss(0.0, 0.012)) for r in reference]
    check = compare_paired("system_throughput", candidate, reference, Band(lower_pct=-2.0))
    assert check.verdict == "PASS"
    assert holds_with(check, 0.0, 0.0164)
    assert not holds_with(check, 2.5, 0.0164)  # the edge moved past the estimate
    assert narrowed(Band(lower_pct=-2.0), 1.0).lower_pct == pytest.approx(
        100.0 * math.expm1((100.0 * math.log(0.98) + 1.0) / 100.0))
    assert narrowed(Band(upper_pct=5.0), 1.0).upper_pct < 5.0


def test_the_capacity_ratio_carries_the_allowance_and_its_valid_gate_does_not() -> None:

    def search(low: float) -> dict[str, object]:
        high = low * 1.01
        return {"capacity_qps": low, "confirmed_capacity_qps": low, "seed": 0,
                "budget": {"resolution": 0.01},
                "runs": [{"rate": low * 0.95, "valid": True, "reasons": []},
                         {"rate": low, "valid": True, "reasons": []},
                         {"rate": high, "valid": False, "reasons": ["TTFT p99 over"]}]}

    vm = [search(100.0 * f) for f in (0.99, 1.01, 1.0, 0.995, 1.005, 1.0)]
    bare = [search(100.0)] * 6
    checks = {c.metric: c for c in instance_checks("", vm, bare, 5.0, 5.0)}
    ratio, gate = checks["capacity_at_slo"], checks["valid_at_bare_metal_capacity"]
    assert ratio.verdict == "PASS" and gate.verdict == "PASS"
    # 6 clean blocks: the ratio's PASS holds with none seen at 70%, not with the
    # whole margin taken (the allowance is in log percent of the capacity)
    assert check_shortfall(ratio, 0, 6, None) is None
    assert check_shortfall(ratio, 0, 6, None, confidence=0.999) is not None
    # the gate's statistic is a z value: no allowance moves it
    assert check_shortfall(gate, 0, 6, None, confidence=0.999) is None


def _capacity_search(capacity: float) -> dict[str, object]:
    return {"capacity_qps": capacity, "confirmed_capacity_qps": capacity, "seed": 0,
            "budget": {"resolution": 0.01},
            "runs": [{"rate": capacity, "valid": True, "reasons": []},
                     {"rate": capacity * 1.01, "valid": False, "reasons": ["TTFT p99 over"]}]}


def test_a_capacity_checks_disturbed_slowdown_is_measured_from_its_searches(
        tmp_path: Path) -> None:

    # two instances a run; the last run's searches found 40% less (a disturbed block)
    per_run = [(100.0, 50.0), (101.0, 49.0), (99.0, 51.0), (60.0, 30.0)]
    with ResultStore.open(tmp_path / "r.db") as store:
        stored = record_series(store, [Repeat([
            instance(name, 1.0, result={"status": "ok", "capacity": _capacity_search(c)})
            for name, c in zip(("s6-4g", "s6-1g"), capacities, strict=True)])
            for capacities in per_run])
        data = load_series(store, stored.series_id)
    assert _values(data, "capacity_at_slo s6-4g") == [100.0, 101.0, 99.0, 60.0]
    assert _values(data, "capacity_at_slo system") == [150.0, 150.0, 150.0, 90.0]
    assert _values(data, "capacity_at_slo s6-2g") is None  # no such instance
    system = _values(data, "capacity_at_slo system")
    assert system is not None
    seen = slowdown_seen(system[:3], system[3:], Band(lower_pct=-5.0))
    assert seen == pytest.approx(-100 * math.log(0.6))
    # a PASS that holds against the assumed 10% slowdown fails against the 51% seen
    vm = [_capacity_search(100.0 * f) for f in (0.99, 1.01, 1.0, 0.995, 1.005, 1.0)] * 2
    ratio = next(c for c in instance_checks("", vm, [_capacity_search(100.0)] * 12, 5.0, 5.0)
                 if c.metric == "capacity_at_slo")
    assert ratio.verdict == "PASS"
    assert check_shortfall(ratio, 1, 13, None) is None
    assert check_shortfall(ratio, 1, 13, seen) is not None

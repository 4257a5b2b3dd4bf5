"""One sentence per judged workload (vgpu.results.verdict.decided): the check that decided it with
its numbers, or what would decide it; the checks' long reasons stay in their detail."""

from __future__ import annotations

from vgpu.results.stats.intervals import summarize
from vgpu.results.verdict.compare import Band, Check, Comparison
from vgpu.results.verdict.decided import DEFAULT_ADVICE, decided_by

# the shape of the LLM capacity check's reason: brackets, rates, then what would decide
LONG = ("VM/bare metal 0.937 [0.759, 1.157] over 3 repeats (95% t interval of 3 "
        "repeats; the searches' brackets +/-4.1%); confirmed capacities, the searches' "
        + "final points VM/bare metal 12.1/13.0, " * 20
        + "; the interval straddles the line: more repeats would decide")


def _check(metric: str, verdict: str, ci: tuple[float, float] | None, reason: str) -> Check:
    return Check(metric=metric, unit="queries/s", candidate=summarize([1.0, 1.0]),
                 reference_mean=1.0, reference=None, difference_pct=-6.3, ci_pct=ci,
                 mdd_pct=None, band=Band(lower_pct=-2.0), verdict=verdict,  # type: ignore
                 reason=reason)


def _comparison(*checks: Check) -> Comparison:
    return Comparison(kind="vm-vs-bare-metal", title="6 vs bm6", candidate="6",
                      reference="bm6", checks=list(checks))


def test_an_undecided_check_says_its_interval_and_what_would_decide_it() -> None:
    text = decided_by(_comparison(_check("capacity_at_slo", "INCONCLUSIVE", (-24.1, 15.7),
                                         LONG)))
    assert text == ("capacity_at_slo undecided: -6.3% [-24.1%, +15.7%], allowed >= -2.00%; "
                    "more repeats would decide")
    assert len(LONG) > 900 and len(text) < 200


def test_a_fail_names_the_failing_check_and_counts_the_others() -> None:
    text = decided_by(_comparison(
        _check("capacity_at_slo", "FAIL", (-9.0, -4.0), LONG),
        _check("valid_at_bare_metal_capacity", "FAIL", None, "0/4 VM runs VALID; more"),
        _check("itl", "PASS", (-1.0, 1.0), "fine")))
    assert text == ("capacity_at_slo FAIL: -6.3% [-9.0%, -4.0%], allowed >= -2.00% "
                    "(and 1 more FAIL)")


def test_a_pass_states_the_headline_and_the_count() -> None:
    text = decided_by(_comparison(_check("gate", "PASS", None, "4/4 VALID"),
                                  _check("system_throughput", "PASS", (-1.0, 1.5), "ok")))
    assert text == ("system_throughput -6.3% [-1.0%, +1.5%], allowed >= -2.00%; all 2 checks "
                    "PASS")


def test_an_undecided_gate_without_advice_gets_the_default() -> None:
    text = decided_by(_comparison(_check("valid_at_offered_rate", "INCONCLUSIVE", None,
                                         "VALID in 3 of 4 repeats at 10 queries/s")))
    assert text == (f"valid_at_offered_rate undecided: VALID in 3 of 4 repeats at 10 "
                    f"queries/s, allowed >= -2.00%; {DEFAULT_ADVICE}")

"""The LLM capacity verdict's error rates at its stated 5% margin, through the real search,
checks and sequential looks (benchmarks/llm_capacity_power.py, which runs 20,000 draws
a setting; docs/results.md has its table). Here a few hundred draws, so each bound is the
stated rate plus about three Monte Carlo standard errors."""

from __future__ import annotations

from benchmarks.llm_capacity_power import Setting, rates, se


def _bound(rate: float, draws: int) -> float:
    return rate + 3 * se(rate, draws)


def test_at_the_margin_neither_a_false_pass_nor_a_false_fail_exceeds_2_5_percent() -> None:
    draws = 300
    found = rates(Setting(0.95), draws, seed=7)
    assert found["PASS"] <= _bound(0.025, draws), found
    assert found["FAIL"] <= _bound(0.025, draws), found


def test_identical_sides_pass_and_a_10_percent_loss_never_does() -> None:
    draws = 200
    same = rates(Setting(1.0, block_pct=1.5), draws, seed=7)
    assert same["FAIL"] == 0 and same["PASS"] >= 0.95 - 3 * se(0.95, draws), same
    assert 4 <= same["blocks"] <= 6  # the pilot decides most, the cap is 6
    lower = rates(Setting(0.90), draws, seed=7)
    assert lower["PASS"] == 0 and lower["FAIL"] >= 0.5, lower

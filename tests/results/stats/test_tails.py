"""Tail latencies pooled over repeats (vgpu.results.stats.tails): the pooled p99 is the one
numpy's ``higher`` method gives on every value, from the runs' stored tails alone; its
order-statistic interval covers the true p99 about as often as it says; the tail-sample
count is stated, and called few below 50."""

from __future__ import annotations

import numpy as np
import pytest

from loadgen.llm.runs import tail
from vgpu.results.stats.tails import pooled_quantile, tail_ratio


def _runs(seed: int, sizes: list[int], scale: float = 1.0) -> tuple[list[dict], np.ndarray]:
    rng = np.random.default_rng(seed)
    values = [rng.lognormal(np.log(0.015), 0.3, n) * scale for n in sizes]
    return [tail(list(v)) for v in values], np.concatenate(values) * 1e3


def test_the_pooled_p99_is_every_values_p99_from_the_stored_tails_alone() -> None:
    tails, every = _runs(0, [1500, 1400, 1600])
    pooled = pooled_quantile(tails)
    assert pooled is not None and pooled.complete
    assert pooled.value == pytest.approx(np.percentile(every, 99, method="higher"), abs=1e-3)
    assert pooled.low <= pooled.value <= pooled.high
    assert pooled.pooled == 4500
    assert pooled.tail_samples == 4500 - (int(np.ceil(0.99 * 4499)) + 1)  # 44
    assert "fewer than 50" in pooled.describe()


def test_the_interval_covers_the_true_p99_about_95_percent_of_the_time() -> None:
    true_p99 = np.exp(np.log(0.015) + 0.3 * 2.3263) * 1e3
    covered = 0
    for seed in range(200):
        tails, _ = _runs(seed, [1000, 1000])
        pooled = pooled_quantile(tails)
        assert pooled is not None
        covered += pooled.low <= true_p99 <= pooled.high
    assert 0.90 <= covered / 200 <= 0.995


def test_a_ratio_of_pooled_p99s_holds_both_sides_intervals() -> None:
    vm_tails, _ = _runs(1, [1500, 1500], scale=1.2)
    bare_tails, _ = _runs(2, [1500, 1500])
    ratio = tail_ratio([{"tails": {"itl": t}} for t in vm_tails],
                       [{"tails": {"itl": t}} for t in bare_tails], "itl")
    assert ratio is not None
    assert ratio.low < ratio.ratio < ratio.high
    assert ratio.low == pytest.approx(ratio.vm.low / ratio.bare.high)
    assert ratio.low > 1.0 and ratio.ratio == pytest.approx(1.2, rel=0.1)
    assert tail_ratio([{"tails": {}}], [{"tails": {"itl": bare_tails[0]}}], "itl") is None

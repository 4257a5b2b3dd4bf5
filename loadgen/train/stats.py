"""Summaries of step-time samples (pure; numpy only)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

PERCENTILES = (50, 90, 95, 99)


def summarize_seconds(samples: Sequence[float]) -> dict[str, float]:
    values = np.asarray(samples, dtype=float)
    if values.size == 0:
        raise ValueError("no samples to summarise")
    summary = {f"p{p}": float(np.percentile(values, p)) for p in PERCENTILES}
    summary.update(
        mean=float(values.mean()), min=float(values.min()), max=float(values.max()),
        count=float(values.size),
    )
    return summary


def slowest_rank_per_step(per_rank: Sequence[Sequence[float]]) -> list[float]:
    """A synchronous step ends when its slowest rank ends, so the job's step time is the
    per-step maximum over ranks."""
    return [max(times) for times in zip(*per_rank, strict=True)]


def exposed_comm_share(synced: Sequence[float], unsynced: Sequence[float]) -> float:
    """Share of a forward+backward spent waiting on gradient allreduce that did not overlap
    with compute: 1 - median(without allreduce) / median(with allreduce), floored at 0."""
    with_comm = float(np.median(synced))
    without = float(np.median(unsynced))
    if with_comm <= 0:
        return 0.0
    return max(0.0, 1.0 - without / with_comm)

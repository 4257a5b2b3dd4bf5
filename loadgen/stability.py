"""The stability window: before it says READY, an instance runs warm-up windows of
``window_ms`` each on its own backend, until the throughputs of the last three agree within
``pct`` percent or ``max_windows`` have run. The same process, session and device that the
timed run uses are the ones warmed, so what the window sees is what LoadGen will measure."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from loadgen.backends import Backend, Feeds
from loadgen.contract import StabilitySpec

WINDOWS_COMPARED = 3


def spread_pct(rates: Sequence[float]) -> float:
    """(max - min) / mean of ``rates``, in percent."""
    mean = sum(rates) / len(rates)
    return (max(rates) - min(rates)) / mean * 100.0 if mean > 0 else float("inf")


def _window_rate(backend: Backend, feeds: Feeds, batch_size: int, window_s: float,
                 clock: Callable[[], float]) -> float:
    """Samples per second over whole batches run until ``window_s`` has passed."""
    started = clock()
    batches = 0
    while True:
        backend.infer(feeds)
        batches += 1
        elapsed = clock() - started
        if elapsed >= window_s:
            return batches * batch_size / elapsed


def _note(stable: bool, windows: list[float], spec: StabilitySpec) -> str:
    last = ", ".join(f"{rate:.4g}" for rate in windows[-WINDOWS_COMPARED:])
    spread = spread_pct(windows[-WINDOWS_COMPARED:])
    if stable:
        return (f"stable after {len(windows)} windows of {spec.window_ms} ms: last three "
                f"{last} samples/s agree within {spread:.1f}% (<= {spec.pct:g}%)")
    return (f"not stable after {len(windows)} windows of {spec.window_ms} ms (the bound): "
            f"last three {last} samples/s spread {spread:.1f}% > {spec.pct:g}%; the timed "
            f"run started anyway and may include warm-up")


def run_windows(backend: Backend, feeds: Feeds, batch_size: int, spec: StabilitySpec,
                clock: Callable[[], float] = time.perf_counter) -> dict[str, Any]:
    """Runs windows until stable or the bound; the record says which, with every
    window's samples/s."""
    windows: list[float] = []
    stable = False
    while len(windows) < spec.max_windows and not stable:
        windows.append(_window_rate(backend, feeds, batch_size, spec.window_ms / 1000.0,
                                    clock))
        stable = (len(windows) >= WINDOWS_COMPARED
                  and spread_pct(windows[-WINDOWS_COMPARED:]) <= spec.pct)
    return {"pct": spec.pct, "window_ms": spec.window_ms, "max_windows": spec.max_windows,
            "windows_samples_per_s": windows, "stable": stable,
            "spread_pct": spread_pct(windows[-WINDOWS_COMPARED:]),
            "note": _note(stable, windows, spec)}

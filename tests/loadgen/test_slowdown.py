"""The injected slowdown (spec ``slowdown``): what the harness reads and how much busy
waiting it adds per batch, checked with a fake clock (no timing in a unit test)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from loadgen.backends import slowed
from loadgen.backends.slowed import SlowedBackend
from loadgen.contract import InferenceRunSpec, ModelSpec
from loadgen.errors import SpecError
from loadgen.spec import parse_spec


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class _Inner:
    name, concurrency = "fake", 1

    def __init__(self, clock: _Clock, seconds: float) -> None:
        self.clock, self.seconds = clock, seconds

    def infer(self, feeds: Any) -> list[np.ndarray]:
        self.clock.now += self.seconds
        return [np.zeros(1)]

    def submit(self, feeds: Any, done: Any) -> None:
        done(self.infer(feeds), None)

    def describe(self) -> dict[str, Any]:
        return {"name": "fake"}


@pytest.mark.parametrize("share", [0.05, 0.10, 0.5])
def test_each_batch_is_followed_by_the_busy_time_that_takes_away_the_share(
        share: float, monkeypatch: pytest.MonkeyPatch) -> None:
    clock, waits = _Clock(), []
    monkeypatch.setattr(slowed.time, "perf_counter", clock)
    monkeypatch.setattr(slowed, "spin", waits.append)
    backend = SlowedBackend(_Inner(clock, 0.020), share)
    results: list[Any] = []
    backend.submit({}, lambda outputs, error: results.append((outputs, error)))
    backend.infer({})
    assert waits == pytest.approx([0.020 * share / (1 - share)] * 2)
    # work per second: 0.020 s of work in 0.020 + wait seconds
    assert 0.020 / (0.020 + waits[0]) == pytest.approx(1 - share)
    assert results[0][1] is None
    assert backend.describe()["injected_slowdown"] == share


def test_a_share_outside_the_range_is_refused() -> None:
    with pytest.raises(ValueError, match="slowdown share"):
        SlowedBackend(_Inner(_Clock(), 0.01), 0.95)


def _doc(**extra: Any) -> dict[str, Any]:
    return {**InferenceRunSpec(model=ModelSpec("resnet50", "tiny")).to_json(), **extra}


def test_the_spec_carries_the_slowdown_only_when_asked() -> None:
    assert "slowdown" not in InferenceRunSpec(model=ModelSpec("resnet50", "tiny")).to_json()
    assert parse_spec(_doc()).slowdown == 0.0
    assert parse_spec(_doc(slowdown=0.1)).slowdown == 0.1
    for bad in (0.95, -0.1, "ten"):
        with pytest.raises(SpecError, match="slowdown"):
            parse_spec(_doc(slowdown=bad))

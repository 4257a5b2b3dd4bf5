"""A backend slowed by a known share, for calibrating verdicts (`vgpu bench
--inject-slowdown`): after each batch it keeps its thread busy for ``share / (1 - share)``
of the time the batch took, so the instance does ``1 - share`` of its work per second, as a
device that got that much slower would. It spins instead of sleeping: a sleeping instance
would hand its CPU to its neighbours and the system would slow by less than ``share``."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from loadgen.backends.base import Backend, Done, Feeds, Wrapping


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class SlowedBackend(Wrapping):
    def __init__(self, inner: Backend, share: float, label: str = "injected_slowdown") -> None:
        if not 0.0 < share < 0.9:
            raise ValueError(f"slowdown share must be in (0, 0.9), got {share}")
        super().__init__(inner)
        self.share = share
        self.label = label  # the key its describe() names the share under
        self._factor = share / (1.0 - share)

    def infer(self, feeds: Feeds) -> list[np.ndarray]:
        started = time.perf_counter()
        outputs = self.inner.infer(feeds)
        spin((time.perf_counter() - started) * self._factor)
        return outputs

    def submit(self, feeds: Feeds, done: Done) -> None:
        started = time.perf_counter()

        def slowed(outputs: list[np.ndarray] | None, error: BaseException | None) -> None:
            spin((time.perf_counter() - started) * self._factor)
            done(outputs, error)

        self.inner.submit(feeds, slowed)

    def describe(self) -> dict[str, Any]:
        return {**self.inner.describe(), self.label: self.share}

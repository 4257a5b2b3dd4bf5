"""A test backend: a SUT that is slow while it warms up, without sleeping. It wraps a real
backend and runs each of its first ``slow_batches`` batches ``1 + extra_passes`` times, so
the early batches really do more work (as a cold cache or a just-in-time compile would).
Used to check that the stability window waits for a warming SUT; never chosen by a spec."""

from __future__ import annotations

from typing import Any

import numpy as np

from loadgen.backends.base import Backend, Done, Feeds, Wrapping


class WarmingBackend(Wrapping):
    def __init__(self, inner: Backend, slow_batches: int, extra_passes: int) -> None:
        super().__init__(inner)
        self.name = f"warming({inner.name})"
        self.slow_batches = slow_batches
        self.extra_passes = extra_passes
        self.batches = 0

    def _extra_work(self, feeds: Feeds) -> None:
        self.batches += 1
        if self.batches <= self.slow_batches:
            for _ in range(self.extra_passes):
                self.inner.infer(feeds)

    def infer(self, feeds: Feeds) -> list[np.ndarray]:
        self._extra_work(feeds)
        return self.inner.infer(feeds)

    def submit(self, feeds: Feeds, done: Done) -> None:
        self._extra_work(feeds)
        self.inner.submit(feeds, done)

    def describe(self) -> dict[str, Any]:
        return {**self.inner.describe(), "warming": {"slow_batches": self.slow_batches,
                                                     "extra_passes": self.extra_passes}}

"""A backend slowed by a known share, for calibrating verdicts (`vgpu bench
--inject-slowdown`): after each batch it keeps its thread busy for ``share / (1 - share)``
of the time the batch took, so the instance does ``1 - share`` of its work per second, as a
device that got that much slower would. It spins instead of sleeping: a sleeping instance
would hand its CPU to its neighbours and the system would slow by less than ``share``."""

from __future__ import annotations

import hashlib
import time
from typing import Any

import numpy as np

from loadgen.backends.base import Backend, Done, Feeds, Wrapping


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


_HASHED = bytes(16384)  # hashlib lets go of the GIL for inputs over 2 KiB: ~15 us a call


def spin_without_gil(seconds: float) -> None:
    """Keeps this thread's core busy for ``seconds`` while the interpreter's other threads
    run: each hash of a 16 KiB block runs with the GIL released, only the loop holds it. A
    server that answers many requests on threads of one process is slowed as a slower device
    would slow it, each request by its share, not held up behind another's spin."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        hashlib.sha256(_HASHED).digest()


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

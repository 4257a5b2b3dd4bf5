"""What every inference backend offers the LoadGen SUT."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

Feeds = dict[str, np.ndarray]
# Called once per submitted batch: (outputs in model output order, None) or (None, error).
Done = Callable[[list[np.ndarray] | None, BaseException | None], None]


class Backend(Protocol):
    name: str
    # How many batches may be in flight at once (1 for an in-process session).
    concurrency: int

    def infer(self, feeds: Feeds) -> list[np.ndarray]:
        """Run one batch and wait for it (warm-up and raw-loop baselines)."""
        ...

    def submit(self, feeds: Feeds, done: Done) -> None:
        """Start one batch; ``done`` is called when it finishes or fails."""
        ...

    def describe(self) -> dict[str, Any]:
        """What was actually used: provider, server, protocol."""
        ...

    def mark_statistics_start(self) -> None:
        """Note server counters before the timed run (no-op without a server)."""
        ...

    def statistics(self) -> dict[str, Any] | None:
        """Server-side statistics where the backend has a server; None otherwise."""
        ...

    def close(self) -> None: ...


class KeepsSamples(Protocol):
    """A backend that can hold every sample where it runs (ONNX Runtime on a GPU): after
    ``keep_samples`` returned True, ``keeps_samples`` is True and the SUT hands it the
    batch's rows of those arrays through ``submit_rows`` instead of gathered feeds."""

    keeps_samples: bool

    def keep_samples(self, samples: dict[str, np.ndarray]) -> bool: ...

    def submit_rows(self, rows: np.ndarray, done: Done) -> None: ...


class Wrapping:
    """A backend around another that changes when batches complete, not what they
    compute (a known slowdown, a simulated device): everything else goes to ``inner``."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.name = inner.name
        self.concurrency = inner.concurrency

    def mark_statistics_start(self) -> None:
        self.inner.mark_statistics_start()

    def statistics(self) -> dict[str, Any] | None:
        return self.inner.statistics()

    def close(self) -> None:
        self.inner.close()

"""A backend whose inference costs nothing, for measuring the harness's own ceiling
(benchmarks/harness_ceiling.py): it keeps the samples as a GPU backend does (only row
numbers reach it), keeps as many batches in flight, and hands each batch back from a
waiter thread, so LoadGen, the SUT's batching, sample gathering and the completion path
are exactly those of a GPU run; only the device's work is missing."""

from __future__ import annotations

import queue
import threading
from typing import Any

import numpy as np

from loadgen.backends.base import Done, Feeds
from loadgen.models import TensorInfo

IN_FLIGHT = 2


class NullBackend:
    name = "null"

    def __init__(self, outputs: list[TensorInfo], in_flight: int = IN_FLIGHT,
                 keeps: bool = True) -> None:
        self.outputs = outputs
        self._keeps = keeps
        self.concurrency = in_flight
        self.keeps_samples = False
        self.rows_seen = 0
        self._want_outputs = True
        self._zeros: dict[int, list[np.ndarray]] = {}
        self._slots = threading.Semaphore(in_flight)
        self._finished: queue.Queue[tuple[int, bool, Done] | None] = queue.Queue()
        self._waiter = threading.Thread(target=self._wait_loop, daemon=True, name="null-wait")
        self._waiter.start()

    def _outputs(self, size: int) -> list[np.ndarray]:
        """Zero outputs of the model's shapes for a batch of ``size``, made once per size."""
        if size not in self._zeros:
            self._zeros[size] = [
                np.zeros((size, *(d or 1 for d in t.sample_shape)), dtype=t.dtype)
                for t in self.outputs]
        return self._zeros[size]

    def keep_samples(self, samples: dict[str, np.ndarray]) -> bool:
        """Takes the samples (by reference: a device copy is the device's work) unless
        made to be fed gathered batches from the host."""
        self.keeps_samples = self._keeps
        return self._keeps

    def want_outputs(self, wanted: bool) -> None:
        self._want_outputs = wanted

    def infer(self, feeds: Feeds) -> list[np.ndarray]:
        return self._outputs(len(next(iter(feeds.values()))))

    def submit(self, feeds: Feeds, done: Done) -> None:
        self._slots.acquire()
        self._finished.put((len(next(iter(feeds.values()))), self._want_outputs, done))

    def submit_rows(self, rows: np.ndarray, done: Done) -> None:
        self._slots.acquire()
        self.rows_seen += len(rows)
        self._finished.put((len(rows), self._want_outputs, done))

    def _wait_loop(self) -> None:
        while (job := self._finished.get()) is not None:
            size, wanted, done = job
            self._slots.release()
            done(self._outputs(size) if wanted else [], None)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "in_flight": self.concurrency,
                "samples_on_device": self.keeps_samples}

    def mark_statistics_start(self) -> None:
        return None

    def statistics(self) -> dict[str, Any] | None:
        return None

    def close(self) -> None:
        self._finished.put(None)
        self._waiter.join(timeout=60)

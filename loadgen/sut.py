"""The LoadGen system under test: queues issued samples, groups them into batches of at
most ``batch_size`` (an Offline query becomes full batches; Server takes what is waiting)
and hands each batch to the backend. A backend failure is recorded and the remaining
samples are completed without inference, so LoadGen can finish and write its logs."""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any, cast

import mlperf_loadgen as lg
import numpy as np

from loadgen.accuracy import argmax_per_output
from loadgen.backends import Backend
from loadgen.backends.base import KeepsSamples
from loadgen.qsl import SampleLibrary


class SampleDispatcher:
    def __init__(
        self, backend: Backend, library: SampleLibrary, batch_size: int, keep_predictions: bool
    ) -> None:
        self.backend = backend
        self.library = library
        self.batch_size = batch_size
        self.keep_predictions = keep_predictions
        # sample index -> argmax of every output (AccuracyOnly only)
        self.predictions: dict[int, np.ndarray] = {}
        self.error: str | None = None
        self.completed_samples = 0
        self.failed_samples = 0
        self.batches = 0
        self.last_completion_unix: float | None = None  # when the last sample completed
        # (unix time, samples completed so far) after every batch: the run's timeline
        self.timeline: list[tuple[float, int]] = []
        self._pending: deque[tuple[int, int]] = deque()
        self._cond = threading.Condition()
        self._count_lock = threading.Lock()
        self._stopping = False
        self._rows_only = bool(getattr(backend, "keeps_samples", False))
        self._worker = threading.Thread(target=self._run, daemon=True, name="sut-dispatch")
        self._worker.start()

    # LoadGen callbacks -------------------------------------------------------------
    def issue_queries(self, samples: list[Any]) -> None:
        with self._cond:
            self._pending.extend((s.id, s.index) for s in samples)
            self._cond.notify()

    def flush_queries(self) -> None:
        return None

    # ------------------------------------------------------------------------------
    def _next_batch(self) -> list[tuple[int, int]] | None:
        with self._cond:
            while not self._pending and not self._stopping:
                self._cond.wait()
            if not self._pending:
                return None
            count = min(self.batch_size, len(self._pending))
            return [self._pending.popleft() for _ in range(count)]

    def _run(self) -> None:
        while (batch := self._next_batch()) is not None:
            ids = [sample_id for sample_id, _ in batch]
            indices = np.fromiter((index for _, index in batch), dtype=np.int64, count=len(batch))
            if self.error is not None:
                self._complete(ids, indices, None)
                continue
            self.batches += 1
            done = self._callback(ids, indices)
            if self._rows_only:
                # The backend holds every loaded sample already (on the GPU): rows suffice.
                cast(KeepsSamples, self.backend).submit_rows(self.library.rows(indices), done)
            else:
                self.backend.submit(self.library.batch(indices), done)

    def _callback(self, ids: list[int], indices: np.ndarray) -> Any:
        return lambda outputs, error: self._done(ids, indices, outputs, error)

    def _done(self, ids: list[int], indices: np.ndarray, outputs: list[np.ndarray] | None,
              error: BaseException | None) -> None:
        if error is not None and self.error is None:
            self.error = f"{self.backend.name} inference failed: {type(error).__name__}: {error}"
        self._complete(ids, indices, outputs if error is None else None)

    def _complete(self, ids: list[int], indices: np.ndarray,
                  outputs: list[np.ndarray] | None) -> None:
        if outputs is None or not self.keep_predictions:
            responses = [lg.QuerySampleResponse(sample_id, 0, 0) for sample_id in ids]
            lg.QuerySamplesComplete(responses)
        else:
            # Each output's argmax per sample; LoadGen copies each response during the call.
            argmax = argmax_per_output(outputs, len(ids))
            responses = []
            for row, (sample_id, index) in enumerate(zip(ids, indices, strict=True)):
                self.predictions[int(index)] = argmax[row]
                responses.append(lg.QuerySampleResponse(
                    sample_id, argmax[row].ctypes.data, argmax[row].nbytes))
            lg.QuerySamplesComplete(responses)
        with self._count_lock:
            self.last_completion_unix = time.time()
            if outputs is None:
                self.failed_samples += len(ids)
            else:
                self.completed_samples += len(ids)
            self.timeline.append((self.last_completion_unix,
                                  self.completed_samples + self.failed_samples))

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._worker.join(timeout=60)

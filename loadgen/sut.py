"""The LoadGen system under test: queues issued samples, groups them into batches of at
most ``batch_size`` (an Offline query becomes full batches; Server takes what is waiting)
and hands each batch to the backend. A backend failure is recorded and the remaining
samples are completed without inference, so LoadGen can finish and write its logs.

The issued samples are held as arrays (response ids, sample indices), one pair per LoadGen
query, and a batch is a slice of them: an Offline query of millions of samples costs no
Python object per sample on the way in (LoadGen's fast SUT hands over plain id and index
lists), and on the way out each completing thread reuses its own response objects. That
keeps the harness far above what one GPU can do (benchmarks/harness_ceiling.py)."""

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

ID_DTYPE = np.dtype(np.uint64)
INDEX_DTYPE = np.dtype(np.int64)


class PendingSamples:
    """Issued, not yet batched samples: chunks of (ids, indices) arrays, taken from the
    front. A batch within one chunk is a view of it (no copy)."""

    def __init__(self) -> None:
        self._chunks: deque[tuple[np.ndarray, np.ndarray]] = deque()
        self._offset = 0  # taken from the first chunk already
        self.count = 0

    def add(self, ids: np.ndarray, indices: np.ndarray) -> None:
        if len(ids):
            self._chunks.append((ids, indices))
            self.count += len(ids)

    def take(self, limit: int) -> tuple[np.ndarray, np.ndarray]:
        """Up to ``limit`` samples in issue order."""
        id_parts, index_parts = [], []
        wanted = min(limit, self.count)
        while wanted > 0:
            ids, indices = self._chunks[0]
            end = min(len(ids), self._offset + wanted)
            id_parts.append(ids[self._offset:end])
            index_parts.append(indices[self._offset:end])
            wanted -= end - self._offset
            self.count -= end - self._offset
            if end == len(ids):
                self._chunks.popleft()
                self._offset = 0
            else:
                self._offset = end
        if len(id_parts) == 1:
            return id_parts[0], index_parts[0]
        if not id_parts:
            return np.empty(0, ID_DTYPE), np.empty(0, INDEX_DTYPE)
        return np.concatenate(id_parts), np.concatenate(index_parts)


class SampleDispatcher:
    def __init__(
        self, backend: Backend, library: SampleLibrary, batch_size: int, keep_predictions: bool,
        rows_only: bool | None = None,
    ) -> None:
        """``rows_only``: hand the backend row numbers, not gathered feeds (default: when
        the backend keeps samples; False for a library other than the one it keeps)."""
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
        self._pending = PendingSamples()
        self._cond = threading.Condition()
        self._count_lock = threading.Lock()
        self._stopping = False
        self._responses = threading.local()
        self._fast_sut = False
        # A backend that can skip copying its outputs back does so unless they are kept.
        want_outputs = getattr(backend, "want_outputs", None)
        if want_outputs is not None:
            want_outputs(keep_predictions)
        self._rows_only = bool(getattr(backend, "keeps_samples", False)) if rows_only is None \
            else rows_only
        self._worker = threading.Thread(target=self._run, daemon=True, name="sut-dispatch")
        self._worker.start()

    # LoadGen ------------------------------------------------------------------------
    def construct_sut(self) -> Any:
        """The LoadGen SUT handle: the fast SUT (id and index lists) where this LoadGen
        has it, else the one handing over a QuerySample object per sample."""
        fast = getattr(lg, "ConstructFastSUT", None)
        self._fast_sut = fast is not None
        if fast is not None:
            return fast(self.issue_fast, self.flush_queries)
        return lg.ConstructSUT(self.issue_queries, self.flush_queries)

    def destroy_sut(self, handle: Any) -> None:
        if self._fast_sut:
            lg.DestroyFastSUT(handle)
        else:
            lg.DestroySUT(handle)

    def issue_fast(self, ids: list[int], indices: list[int]) -> None:
        self._enqueue(np.array(ids, dtype=ID_DTYPE), np.array(indices, dtype=INDEX_DTYPE))

    def issue_queries(self, samples: list[Any]) -> None:
        count = len(samples)
        self._enqueue(np.fromiter((s.id for s in samples), dtype=ID_DTYPE, count=count),
                      np.fromiter((s.index for s in samples), dtype=INDEX_DTYPE, count=count))

    def flush_queries(self) -> None:
        return None

    # ------------------------------------------------------------------------------
    def _enqueue(self, ids: np.ndarray, indices: np.ndarray) -> None:
        with self._cond:
            self._pending.add(ids, indices)
            self._cond.notify()

    def _next_batch(self) -> tuple[np.ndarray, np.ndarray] | None:
        with self._cond:
            while not self._pending.count and not self._stopping:
                self._cond.wait()
            if not self._pending.count:
                return None
            return self._pending.take(self.batch_size)

    def _run(self) -> None:
        while (batch := self._next_batch()) is not None:
            ids, indices = batch
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

    def _callback(self, ids: np.ndarray, indices: np.ndarray) -> Any:
        return lambda outputs, error: self._done(ids, indices, outputs, error)

    def _done(self, ids: np.ndarray, indices: np.ndarray, outputs: list[np.ndarray] | None,
              error: BaseException | None) -> None:
        if error is not None and self.error is None:
            self.error = f"{self.backend.name} inference failed: {type(error).__name__}: {error}"
        self._complete(ids, indices, outputs if error is None else None)

    def _empty_responses(self, ids: np.ndarray) -> list[Any]:
        """This thread's reused response objects (no data), one per id. LoadGen copies the
        responses during QuerySamplesComplete, so they are free again once it returns."""
        count = len(ids)
        pool: list[Any] | None = getattr(self._responses, "pool", None)
        if pool is None or len(pool) < count:
            pool = [lg.QuerySampleResponse(0, 0, 0) for _ in range(max(count, self.batch_size))]
            self._responses.pool = pool
        chosen = pool if len(pool) == count else pool[:count]
        for response, sample_id in zip(chosen, ids.tolist(), strict=True):
            response.id = sample_id
        return chosen

    def _complete(self, ids: np.ndarray, indices: np.ndarray,
                  outputs: list[np.ndarray] | None) -> None:
        if outputs is None or not self.keep_predictions:
            lg.QuerySamplesComplete(self._empty_responses(ids))
        else:
            # Each output's argmax per sample; LoadGen copies each response during the call.
            argmax = argmax_per_output(outputs, len(ids))
            responses = []
            for row, (sample_id, index) in enumerate(zip(ids.tolist(), indices.tolist(),
                                                         strict=True)):
                self.predictions[index] = argmax[row]
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

"""The LoadGen SUT of the token workload. Worker threads of this process take queries in
arrival order, generate, call ``FirstTokenComplete`` with the first token the moment it
exists and ``QuerySamplesComplete`` with every token and their count at the end: LoadGen
itself measures time to first token and time per output token (``use_token_latencies``).
Responses never leave this process."""

from __future__ import annotations

import array
import itertools
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import mlperf_loadgen as lg
import numpy as np

from loadgen.llm.engines import TokenGenerator

STOP = None


@dataclass
class SequenceTiming:
    """The SUT's own clock for one answer (LoadGen's numbers are the measurement; these
    also cover Offline, where LoadGen reports no token latencies)."""

    issued: float
    first: float | None = None
    done: float | None = None
    tokens: int = 0
    last_arrival: float | None = None
    # inter-token gaps (s): a gap between arrivals shared by the tokens that arrived
    gaps: list[float] = field(default_factory=list)

    def tokens_arrived(self, count: int) -> None:
        now = time.perf_counter()
        if self.last_arrival is not None and count > 0:
            self.gaps += [(now - self.last_arrival) / count] * count
        self.last_arrival = now


@dataclass
class TokenSut:
    generator: TokenGenerator
    prompts: list[np.ndarray]
    max_output_tokens: int
    # with a vocabulary size: every query's prompt starts with its own sequence number
    # (base vocab), so a serving engine's prefix cache never answers a repeated sample
    unique_prefix_vocab: int | None = None
    timings: list[SequenceTiming] = field(default_factory=list)
    completions: list[tuple[float, int]] = field(default_factory=list)
    error: str | None = None
    failed_samples: int = 0

    def __post_init__(self) -> None:
        self._queue: queue.Queue[tuple[Any, float] | None] = queue.Queue()
        self._lock = threading.Lock()
        self._issued = itertools.count()
        self._workers = [threading.Thread(target=self._work, daemon=True, name=f"llm-sut-{i}")
                         for i in range(max(1, self.generator.concurrency))]
        for worker in self._workers:
            worker.start()

    @property
    def output_tokens(self) -> int:
        return sum(t.tokens for t in self.timings)

    @property
    def completed_samples(self) -> int:
        return len(self.timings)

    def prompt(self, index: int) -> np.ndarray:
        """The sample's prompt, made unique to this query when asked to."""
        prompt = self.prompts[index]
        if self.unique_prefix_vocab is None:
            return prompt
        with self._lock:
            number = next(self._issued)
        vocab = self.unique_prefix_vocab
        head = [number // vocab**2 % vocab, number // vocab % vocab, number % vocab]
        unique = prompt.copy()
        unique[:len(head)] = head[:len(unique)]
        return unique

    def issue_queries(self, samples: list[Any]) -> None:
        now = time.perf_counter()
        for sample in samples:
            self._queue.put((sample, now))

    def flush_queries(self) -> None:
        """Nothing is held back: every query is already queued for a worker."""

    def stop(self) -> None:
        for _ in self._workers:
            self._queue.put(STOP)
        for worker in self._workers:
            worker.join()

    def _work(self) -> None:
        while (item := self._queue.get()) is not STOP:
            sample, issued = item
            self._answer(sample, SequenceTiming(issued))

    def _answer(self, sample: Any, timing: SequenceTiming) -> None:
        def first_token(token: int) -> None:
            timing.first = time.perf_counter()
            first = array.array("i", [token])
            address, _ = first.buffer_info()
            lg.FirstTokenComplete([lg.QuerySampleResponse(sample.id, address,
                                                          first.itemsize)])

        try:
            tokens = self.generator.generate(self.prompt(sample.index),
                                             self.max_output_tokens, first_token,
                                             timing.tokens_arrived)
        except Exception as exc:  # the query must still complete, or LoadGen waits forever
            tokens = []
            with self._lock:
                self.failed_samples += 1
                self.error = self.error or f"{type(exc).__name__}: {exc}"
        timing.done, timing.tokens = time.perf_counter(), len(tokens)
        data = array.array("i", tokens or [0])
        address, count = data.buffer_info()
        lg.QuerySamplesComplete([lg.QuerySampleResponse(
            sample.id, address, count * data.itemsize, max(1, len(tokens)))])
        with self._lock:
            self.timings.append(timing)
            self.completions.append((time.time(), len(self.timings)))

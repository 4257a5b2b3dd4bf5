"""The slice simulator's engine: iteration-level batching as vLLM does it. Each step
admits waiting sequences while a batch slot and the KV pool allow, then emits one token for
every running sequence; it lasts ``a + b x prefill tokens + c x context tokens`` times the
profile's slowdown, plus a stall of ``stall_ms`` every ``stall_every_ms``. A sequence that
cannot grow in a full KV pool preempts the most recently admitted one, which recomputes
its prefill when it is admitted again. :func:`simulate` runs it on a virtual clock, which
gives a profile's capacity for a seeded arrival pattern without waiting for it; the server
(:mod:`loadgen.llm.slice_sim`) runs it on the wall clock."""

from __future__ import annotations

import itertools
import queue
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from loadgen.llm.runs import (
    Budget,
    LoadShape,
    QueryTiming,
    RunResult,
    Slo,
    prompt_length,
    summarise,
    unit_arrivals,
)


@dataclass(frozen=True)
class SliceProfile:
    """How fast the simulated slice is: step time ``step_ms + prefill_us x prefill tokens
    + context_us x context tokens`` (times ``slowdown``), ``max_num_seqs`` batch slots and
    a KV pool of ``kv_tokens``; every ``stall_every_ms`` (0: never) a step is held
    ``stall_ms`` longer; every ``error_every``-th streamed answer (0: none) breaks off
    after its first token with an SSE error event, as a failing engine's does."""

    step_ms: float = 4.0
    prefill_us: float = 0.0
    context_us: float = 0.0
    max_num_seqs: int = 256
    kv_tokens: int = 1 << 20
    slowdown: float = 1.0
    stall_every_ms: float = 0.0
    stall_ms: float = 0.0
    error_every: int = 0

    def step_s(self, prefill_tokens: int, context_tokens: int) -> float:
        ms = self.step_ms + (self.prefill_us * prefill_tokens
                             + self.context_us * context_tokens) / 1e3
        return ms * self.slowdown / 1e3

    def args(self) -> list[str]:
        """The command-line flags that give this profile to ``python -m
        loadgen.llm.slice_sim``."""
        return [f"--{name.replace('_', '-')}={getattr(self, name)}"
                for name in self.__dataclass_fields__]


@dataclass(eq=False)
class SimSequence:
    prompt_tokens: int
    max_tokens: int
    first_token: int = 0
    generated: int = 0
    kv: int = 0  # KV tokens held; 0 while waiting
    preemptions: int = 0
    out: queue.SimpleQueue[int | None] = field(default_factory=queue.SimpleQueue)

    @property
    def context(self) -> int:
        return self.prompt_tokens + self.generated


@dataclass
class Step:
    """One engine step: how long it lasts and who gets a token."""

    seconds: float
    emitting: list[SimSequence]
    finished: list[SimSequence]


class BatchEngine:
    """The scheduler: FCFS admission, one token per running sequence per step."""

    def __init__(self, profile: SliceProfile) -> None:
        self.profile = profile
        self.waiting: deque[SimSequence] = deque()
        self.running: list[SimSequence] = []
        self.kv_used = 0
        self.preemptions = 0

    def add(self, seq: SimSequence) -> None:
        self.waiting.append(seq)

    @property
    def busy(self) -> bool:
        return bool(self.waiting or self.running)

    def _admit(self) -> int:
        prefill = 0
        p = self.profile
        while self.waiting and len(self.running) < p.max_num_seqs:
            seq = self.waiting[0]
            need = seq.context + 1
            if self.kv_used + need > p.kv_tokens and self.running:
                break
            self.waiting.popleft()
            seq.kv = need
            self.kv_used += need
            prefill += seq.context
            self.running.append(seq)
        return prefill

    def _make_room(self) -> None:
        """Every running sequence grows by one KV token this step; while that overflows the
        pool, the newest is preempted (recompute: back to the front of the queue)."""
        while self.running and self.kv_used + len(self.running) > self.profile.kv_tokens \
                and len(self.running) > 1:
            victim = self.running.pop()
            self.kv_used -= victim.kv
            victim.kv = 0
            victim.preemptions += 1
            self.preemptions += 1
            self.waiting.appendleft(victim)

    def step(self) -> Step:
        prefill = self._admit()
        self._make_room()
        context = sum(seq.context for seq in self.running)
        seconds = self.profile.step_s(prefill, context)
        emitting = list(self.running)
        finished: list[SimSequence] = []
        for seq in emitting:
            seq.generated += 1
            seq.kv += 1
            self.kv_used += 1
            if seq.generated >= seq.max_tokens:
                finished.append(seq)
        for seq in finished:
            self.running.remove(seq)
            self.kv_used -= seq.kv
        return Step(seconds, emitting, finished)


class StallClock:
    """When the periodic stalls fall: ``stall_ms`` added to the first step that starts
    after each multiple of ``stall_every_ms``."""

    def __init__(self, profile: SliceProfile, start: float) -> None:
        self.every = profile.stall_every_ms / 1e3
        self.stall = profile.stall_ms / 1e3
        self.next = start + self.every

    def extra(self, now: float) -> float:
        if self.every <= 0 or now < self.next:
            return 0.0
        while self.next <= now:
            self.next += self.every
        return self.stall


@dataclass(frozen=True)
class Arrival:
    at_s: float
    prompt_tokens: int
    max_tokens: int


def simulate(profile: SliceProfile, arrivals: Sequence[Arrival]) -> list[list[float]]:
    """The engine on a virtual clock: per arrival, the times of its tokens (s)."""
    engine = BatchEngine(profile)
    stalls = StallClock(profile, 0.0)
    seqs = [SimSequence(a.prompt_tokens, a.max_tokens) for a in arrivals]
    times: dict[int, list[float]] = {id(s): [] for s in seqs}
    order = sorted(range(len(arrivals)), key=lambda i: arrivals[i].at_s)
    now, nxt = 0.0, 0
    while nxt < len(order) or engine.busy:
        if not engine.busy:
            now = max(now, arrivals[order[nxt]].at_s)
        while nxt < len(order) and arrivals[order[nxt]].at_s <= now:
            engine.add(seqs[order[nxt]])
            nxt += 1
        step = engine.step()
        now += step.seconds + stalls.extra(now)
        for seq in step.emitting:
            times[id(seq)].append(now)
    return [times[id(s)] for s in seqs]


def simulated_run(profile: SliceProfile, rate: float, shape: LoadShape, slo: Slo, seed: int,
                  repeat: int, budget: Budget) -> RunResult:
    """The run :func:`loadgen.llm.open_loop.endpoint_run` would measure against a server of
    ``profile``, on the virtual clock: the profile's known answer."""
    count = budget.queries(rate)
    at = unit_arrivals(seed, repeat, count) / rate
    arrivals = [Arrival(float(t), prompt_length(seed, repeat, i, shape), shape.output_tokens)
                for i, t in enumerate(at)]
    timings = []
    for arrival, times in zip(arrivals, simulate(profile, arrivals), strict=True):
        timings.append(QueryTiming(arrival.at_s, times[0], times[-1], len(times),
                                   [b - a for a, b in itertools.pairwise(times)]))
    return summarise(rate, timings, slo, budget.min_queries)

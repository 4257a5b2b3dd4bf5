"""A slice simulator for tests: an OpenAI-compatible streaming completions server
(loopback only) whose engine batches at the iteration level as vLLM does. Each step admits
waiting sequences while a batch slot and the KV pool allow, then emits one token for every
running sequence; it lasts ``a + b x prefill tokens + c x context tokens`` times the
profile's slowdown, plus a stall of ``stall_ms`` every ``stall_every_ms``. A sequence that
cannot grow in a full KV pool preempts the most recently admitted one, which recomputes
its prefill when it is admitted again. No model runs: the tokens are seeded from the
prompt. :func:`simulate` runs the same engine on a virtual clock, which gives a profile's
capacity for a seeded arrival pattern without waiting for it.
``python -m loadgen.llm.slice_sim`` prints its URL."""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import queue
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer

from loadgen.llm.capacity import (
    Budget,
    LoadShape,
    QueryTiming,
    RunResult,
    Slo,
    prompt_length,
    summarise,
    unit_arrivals,
)
from loadgen.llm.server import READY_LINE, CompletionHandler

SIM_MODEL_ID = "vgpu-slice-simulator"
LOOPBACK = "127.0.0.1"
VOCAB = 32000
# one streamed token, formatted without json.dumps (as loadgen.llm.server's)
SIM_CHUNK = ('{{"object": "text_completion", "model": "' + SIM_MODEL_ID + '", "choices": '
             '[{{"index": 0, "text": " {token}", "token_ids": [{token}], '
             '"finish_reason": null}}]}}')
END = None  # put on a sequence's queue after its last token


@dataclass(frozen=True)
class SliceProfile:
    """How fast the simulated slice is: step time ``step_ms + prefill_us x prefill tokens
    + context_us x context tokens`` (times ``slowdown``), ``max_num_seqs`` batch slots and
    a KV pool of ``kv_tokens``; every ``stall_every_ms`` (0: never) a step is held
    ``stall_ms`` longer."""

    step_ms: float = 4.0
    prefill_us: float = 0.0
    context_us: float = 0.0
    max_num_seqs: int = 256
    kv_tokens: int = 1 << 20
    slowdown: float = 1.0
    stall_every_ms: float = 0.0
    stall_ms: float = 0.0

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


def token_id(seq: SimSequence, index: int) -> int:
    return (seq.first_token * 31 + index * 7919) % VOCAB


class RealtimeEngine:
    """The engine on the wall clock, in its own thread: steps follow each other without
    drift (a step's end is the next one's start while there is work)."""

    def __init__(self, profile: SliceProfile) -> None:
        self.engine = BatchEngine(profile)
        self.inbox: queue.SimpleQueue[SimSequence] = queue.SimpleQueue()
        self._wake = threading.Event()
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, daemon=True, name="slice-sim")
        self._thread.start()

    def submit(self, seq: SimSequence) -> None:
        self.inbox.put(seq)
        self._wake.set()

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()
        self._thread.join(timeout=5)

    def _drain(self) -> None:
        with contextlib.suppress(queue.Empty):
            while True:
                self.engine.add(self.inbox.get_nowait())

    def _loop(self) -> None:
        stalls = StallClock(self.engine.profile, time.perf_counter())
        start = time.perf_counter()
        while not self._stopped:
            self._drain()
            if not self.engine.busy:
                self._wake.wait(0.5)
                self._wake.clear()
                start = time.perf_counter()
                continue
            step = self.engine.step()
            end = start + step.seconds + stalls.extra(start)
            if (pause := end - time.perf_counter()) > 0:
                time.sleep(pause)
            for seq in step.emitting:
                seq.out.put(token_id(seq, seq.generated))
            for seq in step.finished:
                seq.out.put(END)
            # the next step starts where this one ended; a loop held up by a busy CPU
            # catches up by at most one step rather than bursting through the backlog
            start = max(end, time.perf_counter() - step.seconds)


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
    """The run :func:`loadgen.llm.capacity.endpoint_run` would measure against a server of
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


class SliceHandler(CompletionHandler):
    server: SliceServer  # type: ignore[assignment]

    def do_POST(self) -> None:
        if self.path.rstrip("/") != "/v1/completions":
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        try:
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            prompt = request["prompt"]
            prompt_tokens = len(prompt) if isinstance(prompt, list) else len(str(prompt).split())
            max_tokens = int(request.get("max_tokens", 16))
            if max_tokens < 1 or prompt_tokens < 1:
                raise ValueError("prompt and max_tokens must not be empty")
        except (ValueError, KeyError, TypeError) as exc:
            self._json(400, {"error": {"message": f"bad request: {exc}"}})
            return
        seq = SimSequence(prompt_tokens, max_tokens,
                          first_token=sum(prompt) if isinstance(prompt, list) else 0)
        self.server.engine.submit(seq)
        usage = bool((request.get("stream_options") or {}).get("include_usage"))
        if request.get("stream"):
            self._stream_sequence(seq, usage)
            return
        tokens = list(iter(seq.out.get, END))
        self._json(200, {"object": "text_completion", "model": SIM_MODEL_ID, "choices": [
            {"index": 0, "text": "".join(f" {t}" for t in tokens), "token_ids": tokens,
             "finish_reason": "length"}], "usage": {"prompt_tokens": prompt_tokens,
                                                   "completion_tokens": len(tokens)}})

    def _stream_sequence(self, seq: SimSequence, usage: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        count = 0
        while (token := seq.out.get()) is not END:
            count += 1
            self._chunk(SIM_CHUNK.format(token=token))
        if usage:
            self._chunk(json.dumps({"object": "text_completion", "model": SIM_MODEL_ID,
                                    "choices": [], "usage": {
                                        "prompt_tokens": seq.prompt_tokens,
                                        "completion_tokens": count}}))
        self._chunk("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            self._json(200, {"object": "list",
                             "data": [{"id": SIM_MODEL_ID, "object": "model"}]})
        else:
            self._json(404, {"error": {"message": f"no route {self.path}"}})


class SliceServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512

    def __init__(self, profile: SliceProfile, port: int = 0) -> None:
        super().__init__((LOOPBACK, port), SliceHandler)
        self.engine = RealtimeEngine(profile)

    def server_close(self) -> None:
        self.engine.stop()
        super().server_close()


class SliceSimulator:
    """A slice simulator server in its own process (its own interpreter, so the client
    measuring it does not share a lock with it)."""

    def __init__(self, profile: SliceProfile) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "loadgen.llm.slice_sim", *profile.args()],
            stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith(READY_LINE):
            self.close()
            raise RuntimeError(f"the slice simulator did not start: {line!r}")
        self.url = line[len(READY_LINE):].strip()

    def __enter__(self) -> SliceSimulator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


def parse_profile(argv: list[str] | None) -> tuple[SliceProfile, int]:
    parser = argparse.ArgumentParser(prog="python -m loadgen.llm.slice_sim",
                                     description=__doc__.split("\n\n")[0])
    defaults = SliceProfile()
    for name, spec in SliceProfile.__dataclass_fields__.items():
        kind = int if spec.type == "int" else float
        parser.add_argument(f"--{name.replace('_', '-')}", type=kind,
                            default=getattr(defaults, name))
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    args = vars(parser.parse_args(argv))
    port = args.pop("port")
    return SliceProfile(**args), port


def main(argv: list[str] | None = None) -> int:
    profile, port = parse_profile(argv)
    server = SliceServer(profile, port)
    host, bound = server.server_address[:2]
    print(f"{READY_LINE}http://{host}:{bound}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

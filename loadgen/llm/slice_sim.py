"""A slice simulator for tests: an OpenAI-compatible streaming completions server
(loopback only, 127.0.0.1) around the iteration-level batching engine of
:mod:`loadgen.llm.slice_engine`, on the wall clock. No model runs: the tokens are seeded
from the prompt. ``python -m loadgen.llm.slice_sim`` prints its URL."""

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
from dataclasses import asdict
from http.server import ThreadingHTTPServer

from loadgen.llm.server import READY_LINE, CompletionHandler
from loadgen.llm.server_metrics import KvAccount
from loadgen.llm.slice_engine import BatchEngine, SimSequence, SliceProfile, StallClock

SIM_MODEL_ID = "vgpu-slice-simulator"
LOOPBACK = "127.0.0.1"
VOCAB = 32000
# one streamed token, formatted without json.dumps (as loadgen.llm.server's)
SIM_CHUNK = ('{{"object": "text_completion", "model": "' + SIM_MODEL_ID + '", "choices": '
             '[{{"index": 0, "text": " {token}", "token_ids": [{token}], '
             '"finish_reason": null}}]}}')
SIM_ERROR = json.dumps({"error": {"message": "simulated engine error", "type": "InternalError",
                                  "code": 500}})
END = None  # put on a sequence's queue after its last token


def token_id(seq: SimSequence, index: int) -> int:
    return (seq.first_token * 31 + index * 7919) % VOCAB


class RealtimeEngine:
    """The engine on the wall clock, in its own thread: steps follow each other without
    drift (a step's end is the next one's start while there is work)."""

    def __init__(self, profile: SliceProfile) -> None:
        self.engine = BatchEngine(profile)
        self.kv = KvAccount(profile.kv_tokens)
        self.inbox: queue.SimpleQueue[SimSequence] = queue.SimpleQueue()
        self._wake = threading.Event()
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, daemon=True, name="slice-sim")
        self._thread.start()

    def submit(self, seq: SimSequence) -> None:
        self.kv.queried(seq.prompt_tokens)
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
            self.kv.set_used(self.engine.kv_used)
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
        every = self.server.engine.engine.profile.error_every
        fails = every > 0 and next(self.server.answers) % every == every - 1
        count = 0
        while (token := seq.out.get()) is not END:
            count += 1
            self._chunk(SIM_CHUNK.format(token=token))
            if fails:
                self._chunk(SIM_ERROR)
                break
        if usage and not fails:
            self._chunk(json.dumps({"object": "text_completion", "model": SIM_MODEL_ID,
                                    "choices": [], "usage": {
                                        "prompt_tokens": seq.prompt_tokens,
                                        "completion_tokens": count}}))
        self._chunk("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def do_GET(self) -> None:
        path = self.path.rstrip("/")
        if path == "/v1/models":
            self._json(200, {"object": "list",
                             "data": [{"id": SIM_MODEL_ID, "object": "model"}]})
        elif path == "/version":
            self._json(200, {"version": "vgpu-slice-simulator",
                             "profile": asdict(self.server.engine.engine.profile)})
        elif path == "/metrics":
            self._text(self.server.engine.kv.exposition())
        else:
            self._json(404, {"error": {"message": f"no route {self.path}"}})


class SliceServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512

    def __init__(self, profile: SliceProfile, port: int = 0) -> None:
        super().__init__((LOOPBACK, port), SliceHandler)
        self.engine = RealtimeEngine(profile)
        self.answers = itertools.count()  # streamed answers so far (error_every)

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

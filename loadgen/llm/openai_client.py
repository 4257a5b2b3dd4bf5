"""Backend openai: the LoadGen SUT's engine over HTTP. Each worker thread keeps one
keep-alive connection to an OpenAI-compatible completions endpoint and streams (SSE): the
first streamed token is the first token LoadGen hears of. In a lab ``backend.url`` is vLLM
(``vllm serve``, http://host:8000) or Triton with TensorRT-LLM's OpenAI frontend; without
a url the harness starts vgpu's loopback server for the tiny model."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from loadgen.errors import RunFailed
from loadgen.llm.engines import FirstToken, TokensArrived
from loadgen.llm.server import MODEL_ID, READY_LINE
from loadgen.llm.stream import completion_request, read_stream

TIMEOUT_S = 300.0



def thread_connection(local: threading.local, host: str, port: int | None, https: bool,
                      timeout_s: float = TIMEOUT_S) -> http.client.HTTPConnection:
    """This thread's kept-alive connection to ``host``, opened on first use."""
    connection = getattr(local, "connection", None)
    if connection is None:
        kind = http.client.HTTPSConnection if https else http.client.HTTPConnection
        connection = kind(host, port, timeout=timeout_s)
        connection.connect()
        # small requests go out at once, not after the server's delayed ACK
        connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        local.connection = connection
    return connection

class LoopbackServer:
    """vgpu's OpenAI-compatible server for the tiny model, in its own process."""

    def __init__(self, variant: str, cache_dir: str | None, threads: int = 1,
                 slowdown: float = 0.0) -> None:
        command = [sys.executable, "-m", "loadgen.llm.server", "--variant", variant,
                   "--threads", str(threads)]
        if slowdown:
            command += ["--slowdown", repr(slowdown)]
        self.slowdown = slowdown
        if cache_dir:
            command += ["--cache-dir", cache_dir]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith(READY_LINE):
            self.close()
            raise RunFailed(f"the loopback completions server did not start: {line!r}")
        self.url = line[len(READY_LINE):].strip()

    def cpu_seconds(self) -> float:
        """The server process's CPU time so far (user + system)."""
        import psutil

        times = psutil.Process(self.process.pid).cpu_times()
        return float(times.user + times.system)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


READ_BLOCK = 65536


def arrived_lines(response: Any) -> Iterator[bytes]:
    """The stream's lines as they arrive: whatever the connection holds is taken at once
    (``read1``) and split, rather than a line at a time through the HTTP client's chunked
    decoding, which costs the client more per token than the server's model on a GPU."""
    pending = b""
    while block := response.read1(READ_BLOCK):
        pending += block
        *lines, pending = pending.split(b"\n")
        yield from lines
    if pending:
        yield pending


class OpenAIGenerator:
    name = "openai"

    def __init__(self, url: str, model: str, concurrency: int,
                 server: LoopbackServer | None = None) -> None:
        parts = urlsplit(url)
        self.url, self.model, self.concurrency, self.server = url, model, concurrency, server
        self.host, self.port = parts.hostname or "localhost", parts.port
        self.https = parts.scheme == "https"
        self.base = parts.path.rstrip("/")
        self._local = threading.local()

    @classmethod
    def connect(cls, url: str | None, model: str | None, concurrency: int, variant: str,
                cache_dir: str | None) -> OpenAIGenerator:
        """The endpoint at ``url``, or a loopback server of the tiny model."""
        if url is not None:
            return cls(url, model or MODEL_ID, concurrency)
        server = LoopbackServer(variant, cache_dir)
        return cls(server.url, model or MODEL_ID, concurrency, server)

    def _connection(self) -> http.client.HTTPConnection:
        return thread_connection(self._local, self.host, self.port, self.https)

    def _post(self, body: dict[str, Any]) -> http.client.HTTPResponse:
        connection = self._connection()
        try:
            connection.request("POST", f"{self.base}/v1/completions", json.dumps(body),
                               {"Content-Type": "application/json"})
            response = connection.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            connection.close()
            self._local.connection = None
            raise RunFailed(f"backend openai: {self.url} did not answer: {exc}") from exc
        if response.status != 200:
            detail = response.read()[:300].decode(errors="replace")
            raise RunFailed(f"backend openai: {self.url} answered {response.status}: {detail}")
        return response

    def generate(self, prompt: np.ndarray, max_new: int, on_first: FirstToken | None = None,
                 on_tokens: TokensArrived | None = None) -> list[int]:
        """The answer's tokens; an error event, or a usage count other than ``max_new``,
        fails it (a shorter answer would be measured as a faster one)."""
        response = self._post(completion_request(self.model, [int(t) for t in prompt],
                                                 max_new))
        answer = read_stream(arrived_lines(response), on_first=on_first,
                             on_tokens=on_tokens)
        response.read()  # the stream's end, so the connection can carry the next request
        if (problem := answer.check(max_new)) is not None:
            raise RunFailed(f"backend openai: {self.url}: {problem}")
        return answer.tokens

    def server_cpu_seconds(self) -> float | None:
        """The loopback server's CPU time so far; None for an endpoint elsewhere."""
        return self.server.cpu_seconds() if self.server is not None else None

    def describe(self) -> dict[str, Any]:
        described = {"name": self.name, "execution_provider": "http-sse", "url": self.url,
                     "model": self.model, "in_flight": self.concurrency,
                     "loopback_server": self.server is not None}
        if self.server is not None and self.server.slowdown:
            described["injected_slowdown"] = self.server.slowdown
        return described

    def close(self) -> None:
        if self.server is not None:
            self.server.close()

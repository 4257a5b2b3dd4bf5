"""A loopback OpenAI-compatible completions server for the tiny decoder (standard library
HTTP): ``POST /v1/completions`` with ``prompt`` as a list of token ids, ``max_tokens`` and
``stream`` (server-sent events, one chunk per token, then ``data: [DONE]``), and
``GET /v1/models``; with ``stream_options.include_usage`` a last chunk carries the usage.
It stands in on a machine without vLLM or Triton + TensorRT-LLM, which serve the same API
in a lab; ``python -m loadgen.llm.server`` prints its URL."""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from loadgen.contract import HARNESS_VERSION
from loadgen.llm.engines import OrtGenerator
from loadgen.llm.server_metrics import KvAccount

MODEL_ID = "vgpu-tiny-decoder"
READY_LINE = "listening on "
# One streamed token, as _completion() writes it, formatted without json.dumps: at the tiny
# model's ~0.1 ms per token the encoder would be a measurable part of each token.
STREAM_CHUNK = ('{"id": "cmpl-vgpu", "object": "text_completion", "model": "' + MODEL_ID
                + '", "choices": [{"index": 0, "text": " %d", "token_ids": [%d], '
                '"finish_reason": null}]}')


class CompletionHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: one connection per client worker
    server: CompletionServer

    def setup(self) -> None:
        super().setup()
        # Each token is a small write: without this, Nagle's algorithm holds it back until
        # the client's delayed ACK (tens of ms), which would be measured as model time.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a log line per request would cost more than the tiny model."""

    def _json(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _chunk(self, payload: str) -> None:
        data = f"data: {payload}\n\n".encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _text(self, body: str) -> None:
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        path = self.path.rstrip("/")
        if path == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": MODEL_ID, "object": "model"}]})
        elif path == "/version":
            self._json(200, {"version": f"vgpu-loopback {HARNESS_VERSION}"})
        elif path == "/metrics":
            self._text(self.server.kv.exposition())
        else:
            self._json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        if self.path.rstrip("/") != "/v1/completions":
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        length = int(self.headers.get("Content-Length") or 0)
        try:
            request = json.loads(self.rfile.read(length))
            prompt = np.asarray(request["prompt"], dtype=np.int64)
            max_tokens = int(request.get("max_tokens", 16))
        except (ValueError, KeyError, TypeError) as exc:
            self._json(400, {"error": {"message": f"bad request: {exc}"}})
            return
        if request.get("stream"):
            self._stream(prompt, max_tokens,
                         bool((request.get("stream_options") or {}).get("include_usage")))
        else:
            tokens = list(self.server.generator.stream(prompt, max_tokens))
            self._json(200, _completion(tokens, len(prompt)))

    def _stream(self, prompt: np.ndarray, max_tokens: int, usage: bool = False) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        count = 0
        kv = self.server.kv
        kv.admit(len(prompt))
        try:
            for token in self.server.generator.stream(prompt, max_tokens):
                self._chunk(STREAM_CHUNK % (token, token))
                kv.grow()
                count += 1
        finally:
            kv.release(len(prompt) + count)
        if usage:
            self._chunk(json.dumps({"id": "cmpl-vgpu", "object": "text_completion",
                                    "model": MODEL_ID, "choices": [], "usage": {
                                        "prompt_tokens": len(prompt),
                                        "completion_tokens": count}}))
        self._chunk("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def _completion(tokens: list[int], prompt_tokens: int | None) -> dict[str, Any]:
    """A completions object; token ids as text and, as vLLM's return_token_ids does, as
    ``token_ids``."""
    body: dict[str, Any] = {
        "id": "cmpl-vgpu", "object": "text_completion", "created": int(time.time()),
        "model": MODEL_ID,
        "choices": [{"index": 0, "text": "".join(f" {t}" for t in tokens),
                     "token_ids": tokens, "finish_reason": None}]}
    if prompt_tokens is not None:
        body["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": len(tokens)}
    return body


class CompletionServer(ThreadingHTTPServer):
    daemon_threads = True
    # an open-loop client opens a connection per worker at once: the default backlog of 5
    # resets the rest
    request_queue_size = 512

    def __init__(self, address: tuple[str, int], generator: OrtGenerator) -> None:
        super().__init__(address, CompletionHandler)
        self.generator = generator
        self.kv = KvAccount()  # no pool: each answer holds its own cache


def main(argv: list[str] | None = None) -> int:
    from loadgen.models import build_model

    parser = argparse.ArgumentParser(prog="python -m loadgen.llm.server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    parser.add_argument("--variant", default="tiny")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--slowdown", type=float, default=0.0,
                        help="share of each step's time added as busy waiting (calibration)")
    args = parser.parse_args(argv)
    path = build_model("llm", args.variant, "fp32", args.cache_dir)
    server = CompletionServer((args.host, args.port),
                              OrtGenerator(str(path), args.variant, args.threads,
                                           slowdown=args.slowdown))
    host, port = server.server_address[:2]
    print(f"{READY_LINE}http://{host}:{port}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())

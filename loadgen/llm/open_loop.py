"""The capacity search's client: one open-loop run of seeded Poisson arrivals against an
OpenAI-compatible streaming endpoint. One asyncio event loop sends every query at its
scheduled time over a pool of kept-alive HTTP/1.1 connections (at most ``concurrency``
queries in flight; a query waiting for a place waits on the run's clock, so its wait is
latency, as a client or server that falls behind must show). Each streamed chunk is timed
as it arrives. The run records the client's own cost: the CPU of the loop's thread and
how late queries left against their schedule."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import ssl
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

import numpy as np

from loadgen.llm.rules import CLIENT_CONCURRENCY
from loadgen.llm.runs import (
    Budget,
    LoadShape,
    QueryTiming,
    RunResult,
    Slo,
    make_prompt,
    summarise,
    unit_arrivals,
)
from loadgen.llm.stream import StreamedAnswer, StreamReader, completion_request

TIMEOUT_S = 120.0


class ProtocolError(Exception):
    """The endpoint's answer is not HTTP/1.1 as this client reads it."""


class StaleConnection(ProtocolError):
    """A kept-alive connection the server had closed: nothing came back."""


@dataclass
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    reusable: bool = True
    used: bool = False

    def close(self) -> None:
        self.writer.close()


class EndpointClient:
    """Streams completions from an OpenAI-compatible endpoint: ``url`` (http or https),
    ``model``, at most ``concurrency`` queries in flight."""

    def __init__(self, url: str, model: str, concurrency: int = CLIENT_CONCURRENCY) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency {concurrency}: at least 1 query must be in flight")
        parts = urlsplit(url)
        self.url, self.model, self.concurrency = url, model, concurrency
        self.host, self.port = parts.hostname or "localhost", parts.port
        self.https = parts.scheme == "https"
        self.port = self.port or (443 if self.https else 80)
        self.base = parts.path.rstrip("/")

    def body(self, prompt: list[int], max_tokens: int) -> bytes:
        return json.dumps(completion_request(self.model, prompt, max_tokens)).encode()

    def request(self, body: bytes) -> bytes:
        head = (f"POST {self.base}/v1/completions HTTP/1.1\r\nHost: {self.host}:{self.port}"
                f"\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n"
                f"Content-Length: {len(body)}\r\n\r\n")
        return head.encode("latin-1") + body


class ConnectionPool:
    """Kept-alive connections of one event loop; a broken or closed one is not reused."""

    def __init__(self, client: EndpointClient) -> None:
        self.client = client
        self.idle: list[_Connection] = []
        self.opened = 0

    async def take(self, fresh: bool = False) -> _Connection:
        """An idle connection, or with ``fresh`` (or none idle) a new one."""
        if self.idle and not fresh:
            return self.idle.pop()
        c = self.client
        context = ssl.create_default_context() if c.https else None
        reader, writer = await asyncio.open_connection(c.host, c.port, ssl=context,
                                                       limit=1 << 20)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            # small requests go out at once, not after the server's delayed ACK
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.opened += 1
        return _Connection(reader, writer)

    def give_back(self, connection: _Connection) -> None:
        if connection.reusable:
            self.idle.append(connection)
        else:
            connection.close()

    async def close(self) -> None:
        for connection in self.idle:
            connection.close()
            with contextlib.suppress(OSError, ConnectionError):
                await connection.writer.wait_closed()
        self.idle.clear()


async def _headers(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    status_line = await reader.readline()
    if not status_line:
        raise StaleConnection("the connection closed before the status line")
    parts = status_line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
        raise ProtocolError(f"not an HTTP status line: {status_line[:80]!r}")
    headers: dict[str, str] = {}
    while (line := await reader.readline()) not in (b"\r\n", b"\n"):
        if not line:
            raise ProtocolError("the connection closed inside the headers")
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(parts[1]), headers


async def _body_pieces(connection: _Connection,
                       headers: dict[str, str]) -> AsyncIterator[bytes]:
    """The body as it arrives: chunked, sized, or to the connection's end."""
    reader = connection.reader
    if headers.get("connection", "").lower() == "close":
        connection.reusable = False
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            size_line = await reader.readline()
            try:
                size = int(size_line.split(b";")[0].strip(), 16)
            except ValueError as exc:
                raise ProtocolError(f"bad chunk size {size_line[:40]!r}") from exc
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return
            yield await reader.readexactly(size)
            await reader.readexactly(2)
    elif "content-length" in headers:
        yield await reader.readexactly(int(headers["content-length"]))
    else:
        connection.reusable = False
        while piece := await reader.read(1 << 16):
            yield piece


async def _exchange(pool: ConnectionPool, request: bytes) -> StreamedAnswer:
    connection = await pool.take()
    reused = connection.used
    try:
        return await _on(connection, pool, request)
    except StaleConnection:
        if not reused:
            raise
    # a server may close an idle kept-alive connection at any time: once more, on a new one
    return await _on(await pool.take(fresh=True), pool, request)


async def _on(connection: _Connection, pool: ConnectionPool, request: bytes) -> StreamedAnswer:
    connection.used = True
    try:
        try:
            connection.writer.write(request)
            await connection.writer.drain()
            status, headers = await _headers(connection.reader)
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            raise StaleConnection(f"the connection broke before an answer: {exc}") from exc
        stream = StreamReader()
        pending = b""
        body = b""
        async for piece in _body_pieces(connection, headers):
            if status != 200:
                body += piece
                continue
            pending += piece
            *lines, pending = pending.split(b"\n")
            for line in lines:
                stream.feed(line)
        if status != 200:
            detail = body[:200].decode(errors="replace")
            return StreamedAnswer(error=f"{pool.client.url} answered {status}: {detail}")
        if pending:
            stream.feed(pending)
        return stream.answer
    except BaseException:
        connection.reusable = False
        raise
    finally:
        pool.give_back(connection)


async def stream_completion(pool: ConnectionPool, request: bytes) -> StreamedAnswer:
    """One streamed answer; a connection that fails or times out gives an answer with
    its error."""
    try:
        return await asyncio.wait_for(_exchange(pool, request), TIMEOUT_S)
    except TimeoutError:
        return StreamedAnswer(error=f"{pool.client.url} sent nothing for {TIMEOUT_S:g} s")
    except (OSError, asyncio.IncompleteReadError, ProtocolError) as exc:
        return StreamedAnswer(error=f"{pool.client.url} did not answer: {exc}")


@dataclass
class ClientCost:
    """What the client itself spent on a run: its loop thread's CPU, and how late each
    query left against its schedule (s)."""

    cpu_s: float
    wall_s: float
    lags_s: list[float]
    connections: int

    def to_json(self) -> dict[str, float | int]:
        lags = np.asarray(self.lags_s or [0.0]) * 1e3
        return {"cpu_s": round(self.cpu_s, 4), "wall_s": round(self.wall_s, 4),
                "cpu_share": round(self.cpu_s / self.wall_s, 4) if self.wall_s else 0.0,
                "send_lag_p99_ms": round(float(np.percentile(lags, 99)), 3),
                "send_lag_max_ms": round(float(lags.max()), 3),
                "connections": self.connections}


async def _open_loop(client: EndpointClient, at: np.ndarray, requests: list[bytes],
                     output_tokens: int) -> tuple[list[QueryTiming], ClientCost]:
    pool = ConnectionPool(client)
    places = asyncio.Semaphore(client.concurrency)
    timings = [QueryTiming(float(t)) for t in at]
    lags: list[float] = []
    cpu0 = time.thread_time()
    start = time.perf_counter()

    async def query(i: int) -> None:
        timing = timings[i]
        async with places:
            lags.append(time.perf_counter() - start - timing.scheduled)
            answer = await stream_completion(pool, requests[i])
        timing.error = answer.check(output_tokens)
        if answer.first_s is not None and answer.last_s is not None:
            timing.first, timing.last = answer.first_s - start, answer.last_s - start
        timing.tokens = answer.token_count()
        timing.gaps = answer.gaps_s()

    tasks = []
    for i, t in enumerate(at):
        if (pause := start + t - time.perf_counter()) > 0:
            await asyncio.sleep(pause)
        tasks.append(asyncio.create_task(query(i)))
    await asyncio.gather(*tasks)
    wall = time.perf_counter() - start
    await pool.close()
    return timings, ClientCost(time.thread_time() - cpu0, wall, lags, pool.opened)


def endpoint_run(client: EndpointClient, rate: float, run: int, shape: LoadShape, slo: Slo,
                 seed: int, repeat: int, budget: Budget) -> RunResult:
    """One open-loop run at ``rate`` against the endpoint."""
    count = budget.queries(rate)
    at = unit_arrivals(seed, repeat, count) / rate
    requests = [client.request(client.body(make_prompt(seed, repeat, run, i, shape),
                                           shape.output_tokens)) for i in range(count)]
    timings, cost = asyncio.run(_open_loop(client, at, requests, shape.output_tokens))
    result = summarise(rate, timings, slo, budget.min_queries)
    return replace(result, client={"concurrency": client.concurrency, **cost.to_json()})

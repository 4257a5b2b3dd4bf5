"""The capacity search's asyncio client: HTTP/1.1 framing as real servers send it, kept-alive
connections, the concurrency limit (whose waits count as latency), and its own cost."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import replace

import pytest

from loadgen.llm.open_loop import (
    ConnectionPool,
    EndpointClient,
    endpoint_run,
    stream_completion,
)
from loadgen.llm.runs import Budget, LoadShape, Slo
from loadgen.llm.slice_engine import SliceProfile, simulated_run
from loadgen.llm.slice_sim import SliceSimulator


def sse(*chunks: dict) -> bytes:
    return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"


def tokens(ids: list[int]) -> dict:
    return {"choices": [{"text": "x", "token_ids": ids}]}


def chunked(body: bytes, sizes: list[int]) -> bytes:
    """``body`` cut into HTTP chunks of ``sizes`` (the rest in one last chunk)."""
    out, at = b"", 0
    for size in [*sizes, len(body)]:
        piece = body[at:at + size]
        at += len(piece)
        if piece:
            out += f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    return out + b"0\r\n\r\n"


Reply = Callable[[int], bytes]  # request number on the server -> the raw response


async def _serve(reply: Reply, requests: int, close_after: bool = False
                 ) -> tuple[list[object], list[int]]:
    """Run ``requests`` exchanges against a scripted server; the answers and, per
    connection the server accepted, how many requests it carried."""
    served: list[int] = []
    counter = iter(range(1000))

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        served.append(0)
        mine = len(served) - 1
        while True:
            head = await reader.readuntil(b"\r\n\r\n") if not reader.at_eof() else b""
            if not head:
                break
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length")))
            await reader.readexactly(length)
            served[mine] += 1
            writer.write(reply(next(counter)))
            await writer.drain()
            if close_after:
                break
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = EndpointClient(f"http://127.0.0.1:{port}", "m", concurrency=1)
    pool = ConnectionPool(client)
    answers = []
    for _ in range(requests):
        answers.append(await stream_completion(pool, client.request(client.body([1, 2], 3))))
    await pool.close()
    server.close()
    await server.wait_closed()
    return answers, served


def test_chunks_split_anywhere_are_read_whole_over_one_kept_alive_connection() -> None:
    body = sse(tokens([5]), tokens([]), tokens([6, 7]), {"choices": [],
                                                          "usage": {"completion_tokens": 3}})
    # cuts inside "data:", inside the JSON and between the two newlines of an event
    response = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n" + chunked(body, [3, 17, 40, 1, 2]))
    answers, served = asyncio.run(_serve(lambda _: response, 3))
    for answer in answers:
        assert answer.error is None and answer.tokens == [5, 6, 7]
        assert answer.chunk_sizes == [1, 2] and answer.check(3) is None
    assert served == [3]


def test_an_error_status_a_closed_connection_and_a_short_answer_are_errors() -> None:
    error = json.dumps({"error": {"message": "KV cache full"}}).encode()
    short = sse(tokens([5]), {"choices": [], "usage": {"completion_tokens": 1}})
    replies = [b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: "
               + str(len(error)).encode() + b"\r\n\r\n" + error,
               b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + short]
    answers, served = asyncio.run(_serve(lambda i: replies[min(i, 1)], 2, close_after=True))
    assert answers[0].error is not None and "answered 503" in answers[0].error
    assert "KV cache full" in answers[0].error
    assert answers[1].tokens == [5]
    assert answers[1].check(3) == "usage says 1 completion tokens, 3 were asked for"
    # the server closed each connection: the kept-alive one it closed is retried on a new one
    assert served == [1, 1]


def test_garbage_instead_of_http_is_an_error_not_a_hang() -> None:
    answers, _ = asyncio.run(_serve(lambda _: b"SSH-2.0-OpenSSH_9.6\r\n", 1, close_after=True))
    assert answers[0].error is not None and "not an HTTP status line" in answers[0].error


def test_a_concurrency_limit_queues_on_the_run_clock_as_a_one_slot_server_would() -> None:
    """One place in flight on the client gives the latencies of a server with one batch
    slot: a query's wait for its place is latency (virtual clock: the known answer)."""
    profile = SliceProfile(step_ms=2.0)
    shape, slo = LoadShape(output_tokens=8), Slo(ttft_ms=100.0, tpot_ms=20.0)
    budget = Budget(min_queries=60, duration_s=0.5)
    with SliceSimulator(profile) as sim:
        limited = endpoint_run(EndpointClient(sim.url, "sim", concurrency=1), 80.0, 0,
                               shape, slo, 0, 0, budget)
        free = endpoint_run(EndpointClient(sim.url, "sim"), 80.0, 0, shape, slo, 0, 0,
                            budget)
    one_slot = simulated_run(replace(profile, max_num_seqs=1), 80.0, shape, slo, 0, 0,
                             budget)
    assert limited.client["connections"] == 1 and limited.client["concurrency"] == 1
    assert free.client["connections"] > 1
    assert limited.queries == free.queries and limited.failed == free.failed == 0
    assert one_slot.ttft_p99_ms > 1.5 * slo.ttft_ms and not one_slot.valid
    # a query's wait for its place is latency: a TTFT counts from the query's scheduled
    # time, so the largest holds at least the longest wait before a query left
    assert limited.tails["ttft"]["top_ms"][0] >= limited.client["send_lag_max_ms"]
    # the waits pile up as in the virtual clock's one-slot queue; the real server and a
    # busier machine only add to them (by how much: benchmarks/open_loop_clock.py)
    assert limited.ttft_p99_ms > 0.8 * one_slot.ttft_p99_ms and not limited.valid
    # the limited client's queries left late, the free client's did not wait for a place
    assert limited.client["send_lag_max_ms"] > 100.0
    assert free.client["send_lag_p99_ms"] < limited.client["send_lag_max_ms"]
    assert free.ttft_p99_ms < limited.ttft_p99_ms
    for run in (limited, free):
        assert 0 < run.client["cpu_s"] < run.client["wall_s"]  # one thread's CPU
        assert run.client["send_lag_p99_ms"] >= 0.0


def test_a_client_needs_a_place_for_at_least_one_query() -> None:
    with pytest.raises(ValueError, match="concurrency 0"):
        EndpointClient("http://127.0.0.1:1", "m", concurrency=0)

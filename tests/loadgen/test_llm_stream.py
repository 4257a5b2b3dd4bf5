"""Reading a completions stream: every chunk timed, token ids over text, multi-token and
empty-text chunks, error events and the usage chunk."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from loadgen.llm.stream import UNKNOWN_TOKEN, read_stream


def sse(*chunks: Any, done: bool = True) -> list[bytes]:
    lines: list[bytes] = []
    for chunk in chunks:
        if isinstance(chunk, bytes):
            lines += [chunk, b""]
        else:
            lines += [f"data: {json.dumps(chunk)}".encode(), b""]
    return lines + ([b"data: [DONE]", b""] if done else [])


def token(text: str, ids: list[int] | None = None) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "text": text}
    if ids is not None:
        choice["token_ids"] = ids
    return {"choices": [choice]}


def usage(n: int) -> dict[str, Any]:
    return {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": n}}


def ticking(step: float = 0.01) -> Any:
    counter = itertools.count()
    return lambda: next(counter) * step


def test_every_chunk_is_timed_and_multi_token_chunks_share_their_gap() -> None:
    answer = read_stream(sse(token(" a", [1]), token("", [2]), token(" b c", [3, 4]),
                             usage(4)), clock=ticking())
    assert answer.tokens == [1, 2, 3, 4]
    assert answer.chunk_sizes == [1, 1, 2]
    assert answer.gaps_s() == pytest.approx([0.01, 0.005, 0.005])
    assert answer.check(4) is None


def test_text_without_ids_is_counted_by_the_usage_chunk() -> None:
    answer = read_stream(sse(token(" ab"), token(" cd"), usage(5)), clock=ticking())
    assert answer.tokens == [UNKNOWN_TOKEN, UNKNOWN_TOKEN]
    assert answer.token_count() == 5
    assert answer.check(5) is None


def test_a_usage_count_other_than_the_length_asked_for_fails_the_answer() -> None:
    answer = read_stream(sse(token(" a", [1]), token(" b", [2]), usage(2)))
    assert answer.check(3) == "usage says 2 completion tokens, 3 were asked for"
    short = read_stream(sse(token(" a", [1])))
    assert short.check(3) == "the stream carried 1 tokens, 3 were asked for"


def test_error_events_fail_the_answer() -> None:
    inline = read_stream(sse(token(" a", [1]), {"error": {"message": "KV cache full"}}))
    assert inline.check(1) == "the server sent an error event: KV cache full"
    assert inline.tokens == [1]
    named = read_stream([b"event: error", b'data: {"detail": "overloaded"}', b""])
    assert named.error is not None and "overloaded" in named.error
    garbled = read_stream([b"data: {not json", b""])
    assert garbled.error is not None and "not JSON" in garbled.error


def test_the_sut_keeps_every_gap_and_its_longest_stall(monkeypatch: pytest.MonkeyPatch) -> None:
    from loadgen.llm import sut
    from loadgen.llm.sut import SequenceTiming
    from loadgen.llm.tokens import token_gaps

    clock = iter([0.0, 0.010, 0.030, 0.090])
    monkeypatch.setattr(sut.time, "perf_counter", lambda: next(clock))
    timing = SequenceTiming(issued=0.0)
    for count in (1, 1, 2, 1):  # a chunk of two tokens, then one after a 60 ms stall
        timing.tokens_arrived(count)
    assert timing.gaps == pytest.approx([0.010, 0.010, 0.010, 0.060])
    gaps = token_gaps([timing])
    assert gaps["samples"] == 4 and gaps["longest"] == pytest.approx(60.0)

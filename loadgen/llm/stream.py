"""Reading an OpenAI-compatible completions stream (server-sent events) with the time of
every chunk. A chunk's tokens are its ``token_ids`` (vLLM's return_token_ids; a chunk of
empty text may carry tokens, one chunk may carry several); a server that sends no ids
gives one token per chunk of text until its ``usage`` chunk (``stream_options.
include_usage``) says how many there were. An error event, or a usage count other than the
tokens asked for, fails the answer."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

DONE = "[DONE]"
UNKNOWN_TOKEN = -1  # a token counted from text, without its id


@dataclass
class StreamedAnswer:
    """One streamed answer: its tokens, and per chunk that carried tokens its arrival
    time (perf_counter s) and how many tokens it carried."""

    tokens: list[int] = field(default_factory=list)
    chunk_times: list[float] = field(default_factory=list)
    chunk_sizes: list[int] = field(default_factory=list)
    usage_tokens: int | None = None
    ids_sent: bool = False
    error: str | None = None

    @property
    def first_s(self) -> float | None:
        return self.chunk_times[0] if self.chunk_times else None

    @property
    def last_s(self) -> float | None:
        return self.chunk_times[-1] if self.chunk_times else None

    def token_count(self) -> int:
        """Output tokens: the usage chunk's count where the server sent no ids."""
        if not self.ids_sent and self.usage_tokens is not None:
            return self.usage_tokens
        return len(self.tokens)

    def gaps_s(self) -> list[float]:
        """Inter-token latencies: each gap between chunks, shared by the tokens of the
        later chunk (a chunk of k tokens after g seconds gives k gaps of g/k)."""
        out: list[float] = []
        for before, after, size in zip(self.chunk_times, self.chunk_times[1:],
                                       self.chunk_sizes[1:], strict=False):
            out += [(after - before) / size] * size
        return out

    def check(self, requested: int | None) -> str | None:
        """Why the answer fails: the stream's error, or a usage count that disagrees with
        the tokens received or the length asked for (an answer that ignored
        ``min_tokens`` / ``ignore_eos`` would be measured as a shorter, faster one)."""
        if self.error is not None:
            return self.error
        if self.usage_tokens is not None:
            if self.ids_sent and self.usage_tokens != len(self.tokens):
                return (f"usage says {self.usage_tokens} completion tokens, the stream "
                        f"carried {len(self.tokens)}")
            if requested is not None and self.usage_tokens != requested:
                return (f"usage says {self.usage_tokens} completion tokens, "
                        f"{requested} were asked for")
        elif requested is not None and self.ids_sent and len(self.tokens) != requested:
            return f"the stream carried {len(self.tokens)} tokens, {requested} were asked for"
        return None


def completion_request(model: str, prompt: list[int], max_tokens: int) -> dict[str, Any]:
    """A streamed completions request for exactly ``max_tokens`` tokens (``min_tokens``,
    ``ignore_eos``), greedy, with token ids and the usage chunk."""
    return {"model": model, "prompt": prompt, "max_tokens": max_tokens,
            "min_tokens": max_tokens, "temperature": 0.0, "stream": True,
            "ignore_eos": True, "return_token_ids": True,
            "stream_options": {"include_usage": True}}


def _error_text(obj: Any) -> str | None:
    if isinstance(obj, dict) and obj.get("error") is not None:
        error = obj["error"]
        message = error.get("message") if isinstance(error, dict) else error
        return f"the server sent an error event: {message}"
    return None


def chunk_tokens(chunk: dict[str, Any]) -> tuple[list[int], bool]:
    """The tokens of one chunk and whether the server sent their ids."""
    choices = chunk.get("choices") or []
    if not choices:
        return [], False
    ids = choices[0].get("token_ids")
    if isinstance(ids, list):
        return [int(t) for t in ids], True
    return ([UNKNOWN_TOKEN] if choices[0].get("text") else []), False


class StreamReader:
    """Reads SSE lines one at a time (as a blocking or an asyncio client receives them),
    timing each chunk on arrival; ``on_first`` gets the first token, ``on_tokens`` each
    chunk's token count."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter,
                 on_first: Callable[[int], None] | None = None,
                 on_tokens: Callable[[int], None] | None = None) -> None:
        self.answer = StreamedAnswer()
        self.done = False
        self._event = "message"
        self._clock, self._on_first, self._on_tokens = clock, on_first, on_tokens

    def feed(self, raw: bytes) -> bool:
        """Take one line; True once the stream has ended (``[DONE]`` or a failure)."""
        if self.done:
            return True
        text = raw.decode(errors="replace").strip()
        if not text:
            self._event = "message"
            return False
        if text.startswith("event:"):
            self._event = text[len("event:"):].strip()
            return False
        if not text.startswith("data:"):
            return False
        now = self._clock()
        payload = text[len("data:"):].strip()
        if payload == DONE:
            self.done = True
            return True
        answer = self.answer
        try:
            obj = json.loads(payload)
        except ValueError:
            answer.error = f"the server sent a chunk that is not JSON: {payload[:80]!r}"
            self.done = True
            return True
        error = _error_text(obj) or (f"the server sent an error event: {payload[:200]}"
                                     if self._event == "error" else None)
        if error is not None:
            answer.error = error
            self.done = True
            return True
        usage = obj.get("usage") if isinstance(obj, dict) else None
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            answer.usage_tokens = usage["completion_tokens"]
        new, ids = chunk_tokens(obj) if isinstance(obj, dict) else ([], False)
        answer.ids_sent = answer.ids_sent or ids
        if not new:
            return False
        if not answer.tokens and self._on_first is not None:
            self._on_first(new[0])
        if self._on_tokens is not None:
            self._on_tokens(len(new))
        answer.tokens += new
        answer.chunk_times.append(now)
        answer.chunk_sizes.append(len(new))
        return False


def read_stream(lines: Iterable[bytes], clock: Callable[[], float] = time.perf_counter,
                on_first: Callable[[int], None] | None = None,
                on_tokens: Callable[[int], None] | None = None) -> StreamedAnswer:
    """Read SSE ``lines`` to ``[DONE]`` (or the end), timing each chunk on arrival."""
    reader = StreamReader(clock, on_first, on_tokens)
    for raw in lines:
        if reader.feed(raw):
            break
    return reader.answer

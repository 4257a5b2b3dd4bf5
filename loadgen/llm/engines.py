"""Token generators: greedy decoding with a KV cache, one sequence per call. Each calls
``on_first`` with the first token as soon as it exists (the prefill's), which is what the
SUT reports to LoadGen as the first token, and ``on_tokens`` with how many tokens arrived
each time some do (the SUT times every one: inter-token latency)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import numpy as np

from loadgen.backends.slowed import spin_without_gil
from loadgen.errors import RunFailed
from loadgen.llm_sizes import VARIANTS

FirstToken = Callable[[int], None]
TokensArrived = Callable[[int], None]  # how many tokens just arrived


class TokenGenerator(Protocol):
    name: str
    # how many sequences may be generated at once (threads calling ``generate``)
    concurrency: int

    def generate(self, prompt: np.ndarray, max_new: int, on_first: FirstToken | None = None,
                 on_tokens: TokensArrived | None = None) -> list[int]: ...

    def describe(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


def refuse_slowdown(spec_slowdown: float, backend: str) -> None:
    """Only vgpu's ONNX Runtime engine can be slowed on purpose: a run of another engine
    labelled as slowed would measure nothing it says."""
    if spec_slowdown:
        raise RunFailed(f"an injected slowdown slows the onnxruntime engine of the tiny "
                        f"model, not backend {backend!r}: leave --inject-slowdown out")


class OrtGenerator:
    """The tiny decoder's ONNX graph on ONNX Runtime: prefill, then one step per token
    feeding the present key/values back as the past. ``slowdown`` (--inject-slowdown): after
    each step the thread spins for ``share / (1 - share)`` of the step's time, so tokens come
    as from a device that much slower (spinning, not sleeping, as loadgen.backends.slowed
    explains; with the GIL released, since the loopback server steps many sequences on
    threads of one process)."""

    name = "onnxruntime"

    def __init__(self, model_path: str, variant: str, threads: int | None,
                 device_kind: str = "cpu", concurrency: int = 1, slowdown: float = 0.0) -> None:
        import onnxruntime as ort

        from loadgen.backends.ort import (
            choose_providers,
            preload_cuda_libraries,
            session_options,
            started_provider,
        )
        from loadgen.models.decoder import past_names

        if not 0.0 <= slowdown < 0.9:
            raise ValueError(f"slowdown share must be in [0, 0.9), got {slowdown}")
        self.cfg = VARIANTS[variant]
        self.concurrency = concurrency
        self.slowdown = slowdown
        self._spin_factor = slowdown / (1.0 - slowdown)
        providers = choose_providers(device_kind, ort.get_available_providers())
        if device_kind != "cpu":
            preload_cuda_libraries(ort)  # as the inference backend: the CUDA wheels' libraries
        self.session = ort.InferenceSession(model_path, session_options(
            ort, threads or 1, device_kind != "cpu"), providers=providers)
        self.provider = started_provider(self.session, device_kind)
        self.past_names = past_names(self.cfg.layers)
        self.threads = threads or 1
        dtype = np.float16 if self.session.get_inputs()[1].type == "tensor(float16)" \
            else np.float32
        self.empty_past = np.zeros((1, self.cfg.kv_heads, 0, self.cfg.head_dim), dtype)

    def stream(self, prompt: np.ndarray, max_new: int) -> Iterator[int]:
        """Each token as soon as it is generated."""
        feeds: dict[str, np.ndarray] = {"input_ids": prompt.reshape(1, -1)}
        feeds.update(dict.fromkeys(self.past_names, self.empty_past))
        for _ in range(max_new):
            started = time.perf_counter()
            out = self.session.run(None, feeds)
            if self._spin_factor:
                spin_without_gil((time.perf_counter() - started) * self._spin_factor)
            yield int(out[0][0])
            feeds = {"input_ids": out[0].reshape(1, 1)}
            feeds.update(zip(self.past_names, out[2:], strict=True))

    def generate(self, prompt: np.ndarray, max_new: int, on_first: FirstToken | None = None,
                 on_tokens: TokensArrived | None = None) -> list[int]:
        tokens: list[int] = []
        for token in self.stream(prompt, max_new):
            tokens.append(token)
            if len(tokens) == 1 and on_first is not None:
                on_first(token)
            if on_tokens is not None:
                on_tokens(1)
        return tokens

    def describe(self) -> dict[str, Any]:
        described = {"name": self.name, "execution_provider": self.provider,
                     "intra_op_threads": self.threads, "concurrency": self.concurrency}
        if self.slowdown:
            described["injected_slowdown"] = self.slowdown
        return described

    def close(self) -> None:
        del self.session

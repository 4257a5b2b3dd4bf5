"""Token generators: greedy decoding with a KV cache, one sequence per call. Each calls
``on_first`` with the first token as soon as it exists (the prefill's), which is what the
SUT reports to LoadGen as the first token, and ``on_tokens`` with how many tokens arrived
each time some do (the SUT times every one: inter-token latency)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

import numpy as np

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


class OrtGenerator:
    """The tiny decoder's ONNX graph on ONNX Runtime: prefill, then one step per token
    feeding the present key/values back as the past."""

    name = "onnxruntime"

    def __init__(self, model_path: str, variant: str, threads: int | None,
                 device_kind: str = "cpu", concurrency: int = 1) -> None:
        import onnxruntime as ort

        from loadgen.backends.ort import (
            choose_providers,
            preload_cuda_libraries,
            session_options,
            started_provider,
        )
        from loadgen.models.decoder import past_names

        self.cfg = VARIANTS[variant]
        self.concurrency = concurrency
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
            out = self.session.run(None, feeds)
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
        return {"name": self.name, "execution_provider": self.provider,
                "intra_op_threads": self.threads, "concurrency": self.concurrency}

    def close(self) -> None:
        del self.session

"""The tiny decoder on PyTorch: CUDA when the spec asks for a GPU or MIG slice, the CPU
otherwise; greedy decoding with the KV cache kept on the device."""

from __future__ import annotations

from typing import Any

import numpy as np

from loadgen.backends.pytorch import choose_device, import_torch
from loadgen.llm.engines import FirstToken, TokensArrived


class TorchGenerator:
    name = "torch"

    def __init__(self, variant: str, seed: int, threads: int | None, device_kind: str,
                 concurrency: int = 1) -> None:
        self.th = import_torch()
        from loadgen.llm_sizes import VARIANTS
        from loadgen.torchmodels.decoder import TinyDecoder

        if threads:
            self.th.set_num_threads(threads)
        self.device = choose_device(self.th, device_kind)
        self.cfg = VARIANTS[variant]
        self.model = TinyDecoder(self.cfg, seed).eval().to(self.device)
        self.concurrency = concurrency
        self.threads = threads

    def _empty_past(self) -> list[tuple[Any, Any]]:
        shape = (1, self.cfg.kv_heads, 0, self.cfg.head_dim)
        empty = self.th.zeros(shape, device=self.device)
        return [(empty, empty)] * self.cfg.layers

    def generate(self, prompt: np.ndarray, max_new: int, on_first: FirstToken | None = None,
                 on_tokens: TokensArrived | None = None) -> list[int]:
        tokens: list[int] = []
        with self.th.inference_mode():
            ids = self.th.from_numpy(np.ascontiguousarray(prompt)).to(self.device)[None]
            past = self._empty_past()
            for _ in range(max_new):
                next_token, _, past = self.model(ids, past)
                tokens.append(int(next_token[0]))  # the host copy waits for the device
                if len(tokens) == 1 and on_first is not None:
                    on_first(tokens[0])
                if on_tokens is not None:
                    on_tokens(1)
                ids = next_token[:, None]
        return tokens

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "execution_provider": f"torch-{self.device.type}",
                "device": self.device.type, "intra_op_threads": self.threads,
                "torch_version": self.th.__version__, "concurrency": self.concurrency}

    def close(self) -> None:
        del self.model

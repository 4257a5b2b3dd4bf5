"""The tiny decoder of loadgen.models.decoder as a PyTorch module, with the same weights
(drawn from the same seeded numpy generator) and the same KV-cache interface: input ids
[batch, new] and the past keys/values per layer in; the greedy next token, the last
position's logits and the present keys/values out."""

from __future__ import annotations

import math

import torch
from torch import nn

from loadgen.llm_sizes import VARIANTS, DecoderConfig
from loadgen.models.decoder import MASKED_SCORE, NORM_EPS, decoder_weights

KV = list[tuple[torch.Tensor, torch.Tensor]]


class TinyDecoder(nn.Module):
    def __init__(self, cfg: DecoderConfig, seed: int) -> None:
        super().__init__()
        self.cfg = cfg
        self.weights = nn.ParameterDict({
            name.replace(".", "_"): nn.Parameter(torch.from_numpy(value), requires_grad=False)
            for name, value in decoder_weights(cfg, seed).items()})

    def w(self, name: str) -> torch.Tensor:
        return self.weights[name.replace(".", "_")]

    def _rms(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + NORM_EPS) * self.w(name)

    def _heads(self, x: torch.Tensor, count: int) -> torch.Tensor:
        batch, new, _ = x.shape
        return x.reshape(batch, new, count, self.cfg.head_dim).transpose(1, 2)

    def _attention(self, x: torch.Tensor, i: int, past: tuple[torch.Tensor, torch.Tensor],
                   bias: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        cfg = self.cfg
        q = self._heads(x @ self.w(f"l{i}.wq"), cfg.heads)
        k = torch.cat([past[0], self._heads(x @ self.w(f"l{i}.wk"), cfg.kv_heads)], dim=2)
        v = torch.cat([past[1], self._heads(x @ self.w(f"l{i}.wv"), cfg.kv_heads)], dim=2)
        groups = cfg.heads // cfg.kv_heads
        keys, values = k.repeat(1, groups, 1, 1), v.repeat(1, groups, 1, 1)
        scores = q @ keys.transpose(2, 3) / math.sqrt(cfg.head_dim) + bias
        context = torch.softmax(scores, dim=-1) @ values
        merged = context.transpose(1, 2).reshape(x.shape[0], x.shape[1], cfg.hidden)
        return merged @ self.w(f"l{i}.wo"), (k, v)

    def forward(self, ids: torch.Tensor, past: KV) -> tuple[torch.Tensor, torch.Tensor, KV]:
        start, new = past[0][0].shape[2], ids.shape[1]
        positions = torch.arange(start, start + new, device=ids.device)
        keys = torch.arange(start + new, device=ids.device)
        future = keys[None, :] > positions[:, None]
        bias = torch.where(future, MASKED_SCORE, 0.0).to(self.w("embed").dtype)
        x = self.w("embed")[ids] + self.w("positions")[positions]
        presents: KV = []
        for i in range(self.cfg.layers):
            attended, present = self._attention(self._rms(x, f"l{i}.attn_norm"), i, past[i],
                                                bias)
            presents.append(present)
            x = x + attended
            h = self._rms(x, f"l{i}.mlp_norm")
            gate = h @ self.w(f"l{i}.gate")
            x = x + (nn.functional.silu(gate) * (h @ self.w(f"l{i}.up"))) @ self.w(f"l{i}.down")
        logits = self._rms(x[:, -1], "final_norm") @ self.w("lm_head")
        return logits.argmax(-1), logits, presents


def build_decoder(variant: str) -> TinyDecoder:
    """The decoder for torchmodels' catalogue: weights from torch's seed, as the other
    built-in models take theirs (build_torch_model sets it)."""
    return TinyDecoder(VARIANTS[variant], torch.initial_seed())

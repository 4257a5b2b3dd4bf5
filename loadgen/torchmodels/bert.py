"""BERT with the SQuAD head in PyTorch, layer for layer the ONNX graph of
loadgen.models.bert: word + position + token-type embeddings, LayerNorm, post-LayerNorm
encoder layers with erf GELU, and a 2-way dense head split into start and end logits.
Weights and biases are drawn with the builder's standard deviation."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from loadgen.models.bert import INIT_STD, MASKED_SCORE, VARIANTS, BertConfig

LAYER_NORM_EPS = 1e-12


class EncoderLayer(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        h = cfg.hidden
        self.heads = cfg.heads
        self.query, self.key, self.value = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)
        self.attention_output = nn.Linear(h, h)
        self.attention_norm = nn.LayerNorm(h, eps=LAYER_NORM_EPS)
        self.intermediate = nn.Linear(h, cfg.intermediate)
        self.output = nn.Linear(cfg.intermediate, h)
        self.output_norm = nn.LayerNorm(h, eps=LAYER_NORM_EPS)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, hidden = x.shape
        return x.view(batch, seq, self.heads, hidden // self.heads).transpose(1, 2)

    def forward(self, x: torch.Tensor, mask_bias: torch.Tensor) -> torch.Tensor:
        batch, seq, hidden = x.shape
        context = F.scaled_dot_product_attention(
            self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x)),
            attn_mask=mask_bias)
        merged = context.transpose(1, 2).reshape(batch, seq, hidden)
        x = self.attention_norm(x + self.attention_output(merged))
        ffn = self.output(F.gelu(self.intermediate(x)))
        result: torch.Tensor = self.output_norm(x + ffn)
        return result


class BertSquad(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden)
        self.position_embeddings = nn.Embedding(cfg.max_positions, cfg.hidden)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, cfg.hidden)
        self.embedding_norm = nn.LayerNorm(cfg.hidden, eps=LAYER_NORM_EPS)
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.layers))
        self.qa_outputs = nn.Linear(cfg.hidden, 2)
        self.register_buffer("positions", torch.arange(cfg.seq_len), persistent=False)
        for module in self.modules():
            if isinstance(module, nn.Linear | nn.Embedding):
                nn.init.normal_(module.weight, std=INIT_STD)
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.bias, std=INIT_STD)

    def forward(self, input_ids: torch.Tensor, input_mask: torch.Tensor,
                segment_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = (self.word_embeddings(input_ids) + self.position_embeddings(self.positions)
             + self.token_type_embeddings(segment_ids))
        x = self.embedding_norm(x)
        # (1 - mask) * -10000 as [batch, 1, 1, seq], broadcast over heads and queries.
        mask_bias = ((1.0 - input_mask.to(x.dtype)) * MASKED_SCORE)[:, None, None, :]
        for layer in self.layers:
            x = layer(x, mask_bias)
        start, end = self.qa_outputs(x).unbind(dim=-1)
        return start.contiguous(), end.contiguous()


def build_bert(variant: str) -> BertSquad:
    return BertSquad(VARIANTS[variant])

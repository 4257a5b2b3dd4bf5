"""Training benchmarks: launch torchrun across nodes, store results, scaling reports."""

from __future__ import annotations

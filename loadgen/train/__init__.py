"""Training workloads of the node harness: synthetic-data DDP training and an allreduce
bandwidth probe, both run under torchrun. torch is imported only when a run starts."""

from __future__ import annotations

from loadgen.train.cli import allreduce_main, train_main

__all__ = ["allreduce_main", "train_main"]

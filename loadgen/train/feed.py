"""A rank's batches from files: the input pipeline started, each step's wait for its batch
timed, and what the workers, the node's page cache and the GPU showed in the measured
window."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import torch

from loadgen.train.distributed import RankContext
from loadgen.train.inputstats import rank_input
from loadgen.train.models import num_classes
from loadgen.train.nodestats import (
    GpuSampler,
    child_pids,
    children_cpu,
    memory_bytes,
    prepare_cache,
)
from loadgen.train.pipeline import batch_loader, normalise
from loadgen.train.shards import read_manifest
from loadgen.train.spec import TrainSpec


class FileFeed:
    """Sets each step's batch on the trainer from the input pipeline."""

    def __init__(self, spec: TrainSpec, ctx: RankContext) -> None:
        assert spec.data.path is not None  # the spec reader requires it for files
        self.path, self.device, self.workers = spec.data.path, ctx.device, spec.data.workers
        self.manifest = read_manifest(self.path)
        self.cache_before = ""
        if ctx.local_rank == 0:
            self.cache_before = prepare_cache(self.path, self.manifest, spec.data.cache)
        torch.distributed.barrier()  # no rank reads before its node's cache is emptied
        loader = batch_loader(self.path, spec.batch_size, spec.image_size,
                              num_classes(spec.model), spec.seed, ctx.rank, ctx.world_size,
                              spec.data.workers)
        self.batches: Iterator[dict[str, Any]] = iter(loader)
        self.measuring = False
        self.window_batches: list[dict[str, Any]] = []
        self.waits: list[float] = []
        self.bytes_consumed = 0
        self._cpu_start: dict[int, float] = {}
        self._gpu = GpuSampler(ctx.device)

    def feed(self, trainer: Any) -> None:
        started = time.perf_counter()
        batch = next(self.batches)
        waited = time.perf_counter() - started
        trainer.images = normalise(batch["pixels"], self.device)
        trainer.labels = batch["labels"].to(self.device, non_blocking=True)
        self.bytes_consumed += int(batch["bytes"])
        if self.measuring:
            self.window_batches.append({k: v for k, v in batch.items()
                                        if k not in ("pixels", "labels")})
            self.waits.append(waited)

    def begin_window(self) -> None:
        self._cpu_start = children_cpu(child_pids())
        self._gpu.start()
        self.measuring = True

    def end_window(self, window_s: float) -> dict[str, Any]:
        self.measuring = False
        gpu = self._gpu.stop()
        cpu_end = children_cpu(list(self._cpu_start))
        cpu_s = sum(max(0.0, cpu_end[pid] - start) for pid, start in self._cpu_start.items())
        measured = rank_input(self.window_batches, self.waits, window_s, cpu_s, self.workers,
                              os.cpu_count() or 1)
        return {
            **measured,
            "worker_pids": len(self._cpu_start),
            "path": self.path,
            "dataset_bytes": self.manifest.total_bytes,
            "mean_image_bytes": self.manifest.mean_image_bytes,
            "bytes_consumed_in_run": self.bytes_consumed,
            "page_cache_before_run": self.cache_before,
            "memory_bytes": memory_bytes(),
            "gpu_utilisation_pct": gpu["gpu_utilisation_pct"],
            "gpu_utilisation_samples": gpu["samples"],
            "gpu_utilisation_note": gpu["note"],
        }

    def close(self) -> None:
        del self.batches  # ends the DataLoader's worker processes

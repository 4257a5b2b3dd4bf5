"""Backend torch's device-resident path: every preloaded sample copied to the device once,
each batch gathered there from its row numbers (only the rows cross the bus), run, and its
outputs copied back only when the accuracy check keeps them.

Several batches are in flight, each in a slot of its own: its own CUDA stream, its own
pinned row buffer, its own outputs. On CUDA the full batch (the Offline batch) of each
slot is captured as a CUDA graph (gather and forward pass in one replay: two launches per
batch instead of about 170); other batch sizes (an Offline query's last batch, Server's
batches) run eagerly through the same gather. Capture that fails (an operator that cannot
be captured) leaves that slot eager and says why. Images are kept channels-last (NHWC in
memory) where the model runs channels-last, so the gathered batch is already in the
layout the convolutions want.

The same code runs on the CPU (eager, no streams, no graphs), which is how it is tested
where there is no GPU."""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from loadgen.backends.base import Done

# Eager forward passes on the capture stream before capture: cuDNN and the caching
# allocator settle on their choices, so the graph records the steady state.
CAPTURE_WARMUP_RUNS = 3
IMAGE_RANK = 4  # N, C, H, W


@dataclass
class Slot:
    """One batch in flight: its stream, row buffers, captured graph and outputs."""

    index: int
    stream: Any
    rows_host: Any  # pinned int64 [max_batch] on CUDA
    rows_device: Any  # int64 [max_batch] on the device
    graph: Any = None
    graph_outputs: list[Any] = field(default_factory=list)
    eager_reason: str | None = None


@dataclass
class Pending:
    """A submitted batch the waiter completes: its fence, outputs on the host, callback."""

    slot: Slot
    fence: Any
    outputs: list[Any]
    count: int
    done: Done


def channels_last_storage(th: ModuleType, array: np.ndarray, device: Any) -> Any:
    """An NCHW sample array on ``device`` stored NHWC in memory (a channels-last tensor
    whose rows are contiguous): gathering rows keeps the layout."""
    tensor = th.from_numpy(np.ascontiguousarray(array)).to(device)
    return tensor.contiguous(memory_format=th.channels_last)


def gather(th: ModuleType, samples: Sequence[Any], rows: Any) -> list[Any]:
    """Each input's rows; channels-last storage stays channels-last."""
    gathered = []
    for tensor in samples:
        if tensor.dim() == IMAGE_RANK and tensor.is_contiguous(memory_format=th.channels_last) \
                and not tensor.is_contiguous():
            # index_select on the NHWC view keeps whole rows together
            nhwc = tensor.permute(0, 2, 3, 1).index_select(0, rows)
            gathered.append(nhwc.permute(0, 3, 1, 2))
        else:
            gathered.append(tensor.index_select(0, rows))
    return gathered


class ResidentBatches:
    """Samples on ``device``; ``submit(rows, done, want_outputs)`` runs one batch in a free
    slot and a waiter thread completes it (``done`` gets the outputs, or [] when they were
    not wanted)."""

    def __init__(self, th: ModuleType, module: Callable[..., Any], samples: dict[str, np.ndarray],
                 input_names: Sequence[str], device: Any, max_batch: int, slots: int,
                 channels_last: bool, graphs: bool) -> None:
        self._th, self.module, self.device = th, module, device
        self.max_batch = max_batch
        self.on_cuda = device.type == "cuda"
        self.samples = [
            channels_last_storage(th, samples[name], device)
            if channels_last and samples[name].ndim == IMAGE_RANK
            else th.from_numpy(np.ascontiguousarray(samples[name])).to(device)
            for name in input_names]
        self.resident_bytes = sum(t.numel() * t.element_size() for t in self.samples)
        if self.on_cuda:  # the slots' streams read what the default stream copied
            th.cuda.synchronize(device)
        self.slots = [self._slot(i) for i in range(slots)]
        self._free: queue.Queue[Slot] = queue.Queue()
        for slot in self.slots:
            self._free.put(slot)
        self._finished: queue.Queue[Pending | None] = queue.Queue()
        self._waiter = threading.Thread(target=self._wait_loop, daemon=True,
                                        name="torch-resident-wait")
        self._waiter.start()
        self.graphs_requested = graphs and self.on_cuda
        if self.graphs_requested:
            for slot in self.slots:
                self._capture(slot)

    def _slot(self, index: int) -> Slot:
        th = self._th
        rows_host = th.zeros(self.max_batch, dtype=th.int64)
        stream = None
        if self.on_cuda:
            rows_host = rows_host.pin_memory()
            stream = th.cuda.Stream(device=self.device)
        rows_device = th.zeros(self.max_batch, dtype=th.int64, device=self.device)
        return Slot(index, stream, rows_host, rows_device)

    def _stream(self, slot: Slot) -> Any:
        return self._th.cuda.stream(slot.stream) if slot.stream is not None \
            else contextlib.nullcontext()

    def _forward(self, rows: Any) -> list[Any]:
        with self._th.inference_mode():
            return list(self.module(*gather(self._th, self.samples, rows)))

    def _capture(self, slot: Slot) -> None:
        """The full batch of ``slot`` as a CUDA graph reading its row buffer; eager if
        capture fails."""
        th = self._th
        rows = slot.rows_device[:self.max_batch]
        try:
            slot.stream.wait_stream(th.cuda.current_stream(self.device))
            with th.cuda.stream(slot.stream):
                for _ in range(CAPTURE_WARMUP_RUNS):
                    self._forward(rows)
            slot.stream.synchronize()
            graph = th.cuda.CUDAGraph()
            with th.cuda.graph(graph, stream=slot.stream):
                outputs = self._forward(rows)
            slot.graph, slot.graph_outputs = graph, outputs
        except Exception as exc:  # an operator that cannot be captured: eager, said
            slot.graph, slot.graph_outputs = None, []
            slot.eager_reason = f"CUDA graph capture failed: {type(exc).__name__}: {exc}"
            with contextlib.suppress(Exception):
                th.cuda.synchronize(self.device)

    @property
    def captured(self) -> bool:
        return any(slot.graph is not None for slot in self.slots)

    def submit(self, rows: np.ndarray, done: Done, want_outputs: bool) -> None:
        slot = self._free.get()
        count = len(rows)
        try:
            outputs, fence = self._launch(slot, rows, want_outputs)
        except Exception as exc:
            self._free.put(slot)
            done(None, exc)
            return
        self._finished.put(Pending(slot, fence, outputs, count, done))

    def _launch(self, slot: Slot, rows: np.ndarray, want_outputs: bool) -> tuple[list[Any], Any]:
        th, count = self._th, len(rows)
        if count > self.max_batch:
            raise ValueError(f"a batch of {count} is more than the backend's batch size "
                             f"{self.max_batch}")
        # The slot is free: its last batch completed, so its pinned rows may be rewritten.
        slot.rows_host.numpy()[:count] = rows
        with self._stream(slot):
            device_rows = slot.rows_device[:count]
            device_rows.copy_(slot.rows_host[:count], non_blocking=True)
            if slot.graph is not None and count == self.max_batch:
                slot.graph.replay()
                results = slot.graph_outputs
            else:
                results = self._forward(device_rows)
            host: list[Any] = []
            if want_outputs:
                host = [out.to("cpu", non_blocking=self.on_cuda) for out in results]
            fence = None
            if self.on_cuda:
                # blocking: the waiter sleeps until the batch is done instead of spinning on
                # a core the SUT (or a neighbouring slice's harness) needs
                fence = th.cuda.Event(blocking=True)
                fence.record(slot.stream)
        return host, fence

    def _wait_loop(self) -> None:
        while (job := self._finished.get()) is not None:
            try:
                if job.fence is not None:
                    job.fence.synchronize()
                arrays = [tensor.numpy()[:job.count] for tensor in job.outputs]
            except Exception as exc:
                self._free.put(job.slot)
                job.done(None, exc)
                continue
            self._free.put(job.slot)
            job.done(arrays, None)

    def describe(self) -> dict[str, Any]:
        reasons = sorted({s.eager_reason for s in self.slots if s.eager_reason})
        return {
            "samples_on_device": True,
            "resident_bytes": self.resident_bytes,
            "in_flight": len(self.slots),
            "streams": len(self.slots) if self.on_cuda else 0,
            "cuda_graphs": {
                "requested": self.graphs_requested,
                "captured_batch_sizes": [self.max_batch] if self.captured else [],
                "eager_batch_sizes": "every other size" if self.captured else "all",
                "fallback_reason": reasons[0] if reasons else (
                    None if self.graphs_requested else
                    "not on CUDA" if not self.on_cuda else "disabled"),
            },
        }

    def close(self) -> None:
        self._finished.put(None)
        self._waiter.join(timeout=60)
        for slot in self.slots:
            slot.graph, slot.graph_outputs = None, []
        if self.on_cuda:
            self._th.cuda.synchronize(self.device)

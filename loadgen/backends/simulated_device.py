"""A SIMULATED GPU for the simulator lab's guests (`vgpu sim up --device-model gpu`): the
real backend still computes every batch on the CPU (outputs and accuracy stay real), but
each batch completes when a device of a fixed rate would finish it: one queue, batches
served back to back at ``rate`` samples/s, completion times kept on an absolute timeline
so that a late wake-up of this process does not slow the device down. The rate varies
from run to run by ``noise_cv`` (drawn once per process: a GPU's run-to-run spread, 0.5%
as BERT on the H200 measured), and an upgraded host's simulated slowdown takes its share
of the rate. The CPU must keep up: the rate is set well below what the model reaches
there, and every record names the device as simulated."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from loadgen.backends.base import Backend, Done, Feeds, Wrapping

# Samples per second per compute slice (a MIG 1g slice; a whole A100/H100 is 7) of the
# simulated device, per model family: below the tiny models' CPU rates on two shared cores
# with seven instances, so the CPU never becomes the bottleneck.
RATE_PER_SLICE = {"resnet50": 400.0, "bert": 60.0}
DEFAULT_RATE_PER_SLICE = 200.0
GPU_RUN_TO_RUN_CV = 0.005


def device_rate(model: str, slices: int) -> float:
    """The simulated device's samples/s for ``model`` on ``slices`` compute slices."""
    family = next((k for k in RATE_PER_SLICE if model.lower().startswith(k)), None)
    per_slice = RATE_PER_SLICE[family] if family else DEFAULT_RATE_PER_SLICE
    return per_slice * max(1, slices)


class SimulatedDevice(Wrapping):
    def __init__(self, inner: Backend, rate: float, *, noise_cv: float = GPU_RUN_TO_RUN_CV,
                 slowdown: float = 0.0, clock: Callable[[], float] = time.perf_counter,
                 sleep: Callable[[float], None] = time.sleep,
                 draw: Callable[[], float] | None = None) -> None:
        if rate <= 0 or not 0.0 <= slowdown < 0.9:
            raise ValueError(f"a simulated device needs a rate > 0 and a slowdown in [0, "
                             f"0.9), got {rate} and {slowdown}")
        super().__init__(inner)
        factor = draw() if draw is not None else random.SystemRandom().gauss(1.0, noise_cv)
        self.nominal_rate, self.noise_cv, self.slowdown = rate, noise_cv, slowdown
        self.rate = rate * max(0.5, factor) * (1.0 - slowdown)
        self._clock, self._sleep = clock, sleep
        self._free_at = 0.0
        self._lock = threading.Lock()

    def _slot_end(self, samples: int) -> float:
        """When the device finishes a batch of ``samples`` queued now."""
        with self._lock:
            self._free_at = max(self._clock(), self._free_at) + samples / self.rate
            return self._free_at

    def _wait_until(self, moment: float) -> None:
        left = moment - self._clock()
        if left > 0:
            self._sleep(left)

    def infer(self, feeds: Feeds) -> list[np.ndarray]:
        end = self._slot_end(_batch(feeds))
        outputs = self.inner.infer(feeds)
        self._wait_until(end)
        return outputs

    def submit(self, feeds: Feeds, done: Done) -> None:
        end = self._slot_end(_batch(feeds))

        def finished(outputs: list[np.ndarray] | None, error: BaseException | None) -> None:
            if error is None:
                self._wait_until(end)
            done(outputs, error)

        self.inner.submit(feeds, finished)

    def describe(self) -> dict[str, Any]:
        return {**self.inner.describe(), "simulated_device": {
            "rate_samples_s": round(self.rate, 3), "nominal_rate_samples_s": self.nominal_rate,
            "noise_cv": self.noise_cv, "host_slowdown": self.slowdown,
            "note": "SIMULATED GPU of the simulator lab: the CPU computes, completions are "
                    "paced as a device of this rate"}}


def _batch(feeds: Feeds) -> int:
    first = next(iter(feeds.values()), None)
    return int(first.shape[0]) if first is not None and first.ndim else 1

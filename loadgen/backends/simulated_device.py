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

import queue
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from loadgen.backends.base import Backend, Done, Feeds, Wrapping

# Samples per second per compute slice (a MIG 1g slice; a whole A100/H100 is 7) of the
# simulated device, per model family: seven slices at once ask about a third of what the
# tiny models reach on two shared cores (resnet50/tiny b64 above 4,700/s, bert/tiny b8
# about 420/s), so the CPU keeps up; the record counts the batches where it did not.
RATE_PER_SLICE = {"resnet50": 250.0, "bert": 20.0}
DEFAULT_RATE_PER_SLICE = 200.0
GPU_RUN_TO_RUN_CV = 0.005
# a batch the CPU finished this much after the device's slot: the CPU set the pace there
LATE_S = 0.002
IN_FLIGHT = 2  # batches queued on the device at once, as a harness keeps a GPU's stream fed


def device_rate(model: str, slices: int) -> float:
    """The simulated device's samples/s for ``model`` on ``slices`` compute slices."""
    family = next((k for k in RATE_PER_SLICE if model.lower().startswith(k)), None)
    per_slice = RATE_PER_SLICE[family] if family else DEFAULT_RATE_PER_SLICE
    return per_slice * max(1, slices)


class SimulatedDevice(Wrapping):
    """Batches computed by ``inner`` on the CPU, completed on the device's timeline. As on a
    GPU's stream, up to IN_FLIGHT batches are queued: the SUT hands over the next batch
    while the device still runs the last, so the harness's own time between batches does
    not idle the device (a completion thread waits for each batch's end)."""

    def __init__(self, inner: Backend, rate: float, *, noise_cv: float = GPU_RUN_TO_RUN_CV,
                 slowdown: float = 0.0, injected: float = 0.0,
                 clock: Callable[[], float] = time.perf_counter,
                 sleep: Callable[[float], None] = time.sleep,
                 draw: Callable[[], float] | None = None) -> None:
        if rate <= 0 or not 0.0 <= slowdown < 0.9:
            raise ValueError(f"a simulated device needs a rate > 0 and a slowdown in [0, "
                             f"0.9), got {rate} and {slowdown}")
        super().__init__(inner)
        factor = draw() if draw is not None else random.SystemRandom().gauss(1.0, noise_cv)
        self.nominal_rate, self.noise_cv, self.slowdown = rate, noise_cv, slowdown
        self.injected = injected  # the part of ``slowdown`` --inject-slowdown asked for
        self.rate = rate * max(0.5, factor) * (1.0 - slowdown)
        self._clock, self._sleep = clock, sleep
        self._free_at = 0.0
        self._lock = threading.Lock()
        self.batches = 0
        self.late = 0  # batches the CPU finished after the device would have
        self._slots = threading.BoundedSemaphore(IN_FLIGHT)
        self._ends: queue.Queue[tuple[float, Callable[[], None]] | None] = queue.Queue()
        self._completer: threading.Thread | None = None
        self._paced = True  # off after the timed part: see end_timed

    def _slot_end(self, samples: int) -> float:
        """When the device finishes a batch of ``samples`` queued now."""
        with self._lock:
            self._free_at = max(self._clock(), self._free_at) + samples / self.rate
            self.batches += 1
            return self._free_at

    def _wait_until(self, moment: float) -> None:
        left = moment - self._clock()
        if left > 0:
            self._sleep(left)
        elif -left > LATE_S:
            with self._lock:
                self.late += 1

    def infer(self, feeds: Feeds) -> list[np.ndarray]:
        if not self._paced:
            return self.inner.infer(feeds)
        end = self._slot_end(_batch(feeds))
        outputs = self.inner.infer(feeds)
        self._wait_until(end)
        return outputs

    def submit(self, feeds: Feeds, done: Done) -> None:
        if not self._paced:
            self.inner.submit(feeds, done)
            return
        self._slots.acquire()  # at most IN_FLIGHT batches queued on the device
        end = self._slot_end(_batch(feeds))

        def finished(outputs: list[np.ndarray] | None, error: BaseException | None) -> None:
            def complete() -> None:
                try:
                    done(outputs, error)
                finally:
                    self._slots.release()

            if error is not None:
                complete()
                return
            self._start_completer()
            self._ends.put((end, complete))

        self.inner.submit(feeds, finished)

    def _start_completer(self) -> None:
        with self._lock:
            if self._completer is None:
                self._completer = threading.Thread(target=self._complete_in_order,
                                                   daemon=True, name="simulated-device")
                self._completer.start()

    def _complete_in_order(self) -> None:
        while (item := self._ends.get()) is not None:
            end, complete = item
            self._wait_until(end)
            complete()

    def mark_statistics_start(self) -> None:
        with self._lock:
            self.batches = self.late = 0
        super().mark_statistics_start()

    def close(self) -> None:
        if self._completer is not None:
            self._ends.put(None)
            self._completer.join(timeout=5.0)
        super().close()

    def end_timed(self) -> dict[str, Any]:
        """The device's record with the timed part's batch counts. What runs after the
        timed part (the accuracy pass) is not timed and runs at the CPU's own pace: at
        this device's rate, far below a real GPU's, it would take longer than the run."""
        self._drain()
        self._paced = False
        return self.describe()["simulated_device"]

    def _drain(self) -> None:
        """Waits until every queued batch has completed."""
        for _ in range(IN_FLIGHT):
            self._slots.acquire()
        for _ in range(IN_FLIGHT):
            self._slots.release()

    def describe(self) -> dict[str, Any]:
        return {**self.inner.describe(), "simulated_device": {
            "rate_samples_s": round(self.rate, 3), "nominal_rate_samples_s": self.nominal_rate,
            "noise_cv": self.noise_cv,
            "host_slowdown": round(1.0 - (1.0 - self.slowdown) / (1.0 - self.injected), 6),
            "injected_slowdown": self.injected, "in_flight": IN_FLIGHT,
            "batches": self.batches, "cpu_late_batches": self.late,
            "note": "SIMULATED GPU: the CPU computes, completions are paced as a device of "
                    "this rate"}}


def _batch(feeds: Feeds) -> int:
    first = next(iter(feeds.values()), None)
    return int(first.shape[0]) if first is not None and first.ndim else 1

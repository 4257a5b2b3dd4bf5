"""Backend torch's device-resident path, run with the CPU build of torch (eager: no CUDA,
no streams, no graphs): rows gathered from the resident samples give the model's outputs
on those samples, channels-last storage stays channels-last through the gather, outputs
come back only when wanted, several batches complete in flight, a batch larger than the
backend's fails cleanly, and a failed graph capture leaves the slot eager and says why.
The CUDA graph itself runs only on a GPU (tests/gpu)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from loadgen.contract import INPUT_NAMES, ModelSpec
from loadgen.models import builtin_model_io
from loadgen.qsl import SampleLibrary

torch = pytest.importorskip("torch", reason="the train extra (torch) is not installed")

from loadgen.backends.pytorch import TorchBackend  # noqa: E402
from loadgen.backends.torch_resident import (  # noqa: E402
    ResidentBatches,
    channels_last_storage,
    gather,
)
from loadgen.torchmodels import build_torch_model  # noqa: E402

pytestmark = pytest.mark.train
CPU = torch.device("cpu")


def samples(model: str, count: int = 12) -> dict[str, np.ndarray]:
    library = SampleLibrary(builtin_model_io(model, "tiny", "fp32"), seed=3,
                            performance_count=count)
    library.preload()
    assert library.preloaded is not None
    return library.preloaded


class Collected:
    def __init__(self) -> None:
        self.results: list[tuple[Any, BaseException | None]] = []
        self.finished = threading.Semaphore(0)

    def __call__(self, outputs: Any, error: BaseException | None) -> None:
        self.results.append((outputs, error))
        self.finished.release()

    def wait(self, count: int) -> None:
        for _ in range(count):
            assert self.finished.acquire(timeout=30)


def resident(model: str, data: dict[str, np.ndarray], max_batch: int = 4, slots: int = 3,
             channels_last: bool = False) -> tuple[ResidentBatches, Any]:
    module = build_torch_model(model, "tiny", 5).eval()
    batches = ResidentBatches(torch, module, data, INPUT_NAMES[model], CPU, max_batch, slots,
                              channels_last=channels_last, graphs=True)
    return batches, module


def test_channels_last_storage_survives_the_gather() -> None:
    images = samples("resnet50")["input"]
    stored = channels_last_storage(torch, images, CPU)
    assert stored.is_contiguous(memory_format=torch.channels_last)
    rows = torch.tensor([7, 2, 2, 0])
    [batch] = gather(torch, [stored], rows)
    assert batch.shape == (4, *images.shape[1:])
    assert batch.is_contiguous(memory_format=torch.channels_last)
    np.testing.assert_array_equal(batch.numpy(), images[[7, 2, 2, 0]])


@pytest.mark.parametrize(("model", "channels_last"), [("resnet50", True), ("bert", False)])
def test_rows_give_the_models_outputs_on_those_samples(model: str, channels_last: bool) -> None:
    data = samples(model)
    batches, module = resident(model, data, channels_last=channels_last)
    collected = Collected()
    chosen = [np.array([3, 1, 8, 0]), np.array([11, 5]), np.array([2, 2, 9, 4])]
    try:
        for rows in chosen:  # full and partial batches, more than one in flight
            batches.submit(rows, collected, want_outputs=True)
        collected.wait(len(chosen))
    finally:
        batches.close()
    for rows, (outputs, error) in zip(chosen, collected.results, strict=True):
        assert error is None
        with torch.inference_mode():
            expected = module(*(torch.from_numpy(data[n][rows]) for n in INPUT_NAMES[model]))
        for got, want in zip(outputs, expected, strict=True):
            np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


def test_outputs_stay_on_the_device_unless_wanted() -> None:
    batches, _ = resident("bert", samples("bert"))
    collected = Collected()
    try:
        batches.submit(np.array([0, 1]), collected, want_outputs=False)
        collected.wait(1)
    finally:
        batches.close()
    assert collected.results == [([], None)]


def test_a_batch_larger_than_the_backends_fails_and_frees_its_slot() -> None:
    batches, _ = resident("bert", samples("bert"), max_batch=2, slots=1)
    collected = Collected()
    try:
        batches.submit(np.arange(3), collected, want_outputs=True)
        batches.submit(np.arange(2), collected, want_outputs=True)  # the one slot is free
        collected.wait(2)
    finally:
        batches.close()
    (none, error), (outputs, ok) = collected.results
    assert none is None and isinstance(error, ValueError) and "batch size 2" in str(error)
    assert ok is None and outputs[0].shape[0] == 2


def test_on_the_cpu_nothing_is_captured_and_the_record_says_why() -> None:
    batches, _ = resident("resnet50", samples("resnet50"), channels_last=True)
    try:
        described = batches.describe()
    finally:
        batches.close()
    assert described["samples_on_device"] is True and described["in_flight"] == 3
    assert described["streams"] == 0
    assert described["cuda_graphs"] == {"requested": False, "captured_batch_sizes": [],
                                        "eager_batch_sizes": "all",
                                        "fallback_reason": "not on CUDA"}


def test_a_failed_capture_leaves_the_slot_eager() -> None:
    data = samples("bert")
    batches, _ = resident("bert", data, slots=1)
    collected = Collected()
    try:
        batches._capture(batches.slots[0])  # no CUDA stream here: capture cannot start
        slot = batches.slots[0]
        assert slot.graph is None and slot.eager_reason is not None
        assert slot.eager_reason.startswith("CUDA graph capture failed: ")
        batches.submit(np.array([4, 5, 6, 7]), collected, want_outputs=True)
        collected.wait(1)
        assert batches.describe()["cuda_graphs"]["fallback_reason"] == slot.eager_reason
    finally:
        batches.close()
    outputs, error = collected.results[0]
    assert error is None and outputs[0].shape[0] == 4


def test_backend_torch_on_the_cpu_keeps_feeding_from_the_host() -> None:
    backend = TorchBackend(ModelSpec("bert", "tiny"), 1, "cpu", seed=5, batch_size=4)
    try:
        assert backend.keep_samples(samples("bert")) is False
        assert backend.keeps_samples is False
        described = backend.describe()
    finally:
        backend.close()
    assert described["samples_on_device"] is False and described["transfer"] == "none"
    assert described["batch_size"] == 4

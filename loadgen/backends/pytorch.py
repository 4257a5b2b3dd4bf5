"""PyTorch in-process backend: the built-in models as torch modules (loadgen.torchmodels)
under ``torch.inference_mode()``, on CUDA for a gpu/mig device, on the CPU otherwise.

torch is imported when the backend opens, after the device binding has set
CUDA_VISIBLE_DEVICES, so the bound GPU or MIG slice is CUDA device 0. A gpu/mig run on a
torch without CUDA fails; it never falls back to the CPU.

On CUDA the preloaded samples go to the device before the run (``keep_samples``) and each
batch is gathered there from its row numbers, captured as a CUDA graph at the full batch
size, several batches in flight on their own streams (loadgen/backends/torch_resident.py).
Feeds from the host (warm-up, a dataset too big for the device, the CPU) take ``submit``:
copied in from pinned memory, run, and copied out without waiting, a waiter thread handing
each finished batch back."""

from __future__ import annotations

import os
import queue
import sys
import threading
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from loadgen.backends.base import Done, Feeds
from loadgen.contract import INPUT_NAMES, ModelSpec
from loadgen.errors import RunFailed

if TYPE_CHECKING:
    import torch

IN_FLIGHT = 2
# Batches in flight on the device-resident path, each on its own stream: one runs while
# the next is gathered and queued and the last completes.
RESIDENT_IN_FLIGHT = 3
# Samples kept on the device up to this size (as ONNX Runtime's backend); a larger dataset
# is copied in per batch.
RESIDENT_SAMPLES_MAX_BYTES = 4 * 1024**3
# Set to 1 to run the resident path without CUDA graphs (eager), e.g. to compare.
EAGER_ENV = "VGPU_TORCH_EAGER"
PROVIDERS = {"cuda": "torch-cuda", "cpu": "torch-cpu"}
# fp32 on CUDA runs its matrix products and convolutions in TF32, as ONNX Runtime's CUDA
# provider does by default (use_tf32): both backends measure the same arithmetic.
TF32_ON_CUDA = True


def import_torch() -> ModuleType:
    try:
        import torch
    except ImportError as exc:
        raise RunFailed(f"backend torch needs PyTorch, which {sys.executable} cannot import "
                        f"({exc}): install torch (a CUDA build for device.kind gpu or mig) "
                        f"or set backend.name to onnxruntime") from exc
    return torch


def choose_device(th: ModuleType, device_kind: str) -> torch.device:
    if device_kind == "cpu":
        return th.device("cpu")
    if not th.cuda.is_available():
        build = f"built for CUDA {th.version.cuda}" if th.version.cuda else "a CPU-only build"
        raise RunFailed(
            f"device.kind {device_kind} needs CUDA, but torch {th.__version__} ({build}) "
            f"sees no CUDA device with CUDA_VISIBLE_DEVICES="
            f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r}: install a CUDA build of torch, or "
            f"check the driver and the device binding")
    return th.device("cuda", 0)


def place_model(th: ModuleType, model: Any, spec: ModelSpec, device: torch.device) -> Any:
    """The model in the spec's precision on ``device`` (channels-last for ResNet on CUDA)."""
    dtype = th.float16 if spec.precision == "fp16" else th.float32
    model = model.to(device=device, dtype=dtype)
    if device.type == "cuda" and spec.name == "resnet50":
        model = model.to(memory_format=th.channels_last)
    return model


def math_policy(device_type: str) -> dict[str, Any]:
    """What the run sets for its arithmetic: on CUDA TF32 for fp32, and cuDNN's algorithms
    chosen by its heuristics rather than timed in each process (``cudnn.benchmark``), so
    that every run of one configuration on one GPU, driver and cuDNN runs the same kernels
    and two runs differ by the device, not by an autotuner's pick; nothing on the CPU (its
    kernels have neither)."""
    if device_type != "cuda":
        return {"cudnn_benchmark": False, "tf32": False}
    return {"cudnn_benchmark": False, "cudnn_algorithms": "heuristic", "tf32": TF32_ON_CUDA}


def apply_math_policy(th: ModuleType, policy: dict[str, Any]) -> dict[str, Any]:
    """Sets the policy explicitly (not torch's defaults, which differ between matrix
    products and convolutions) and returns what torch reports back, for the record."""
    th.backends.cudnn.benchmark = policy["cudnn_benchmark"]
    th.backends.cudnn.deterministic = False
    th.set_float32_matmul_precision("high" if policy["tf32"] else "highest")
    th.backends.cudnn.allow_tf32 = policy["tf32"]
    return {**policy, "float32_matmul_precision": th.get_float32_matmul_precision(),
            "cudnn_allow_tf32": bool(th.backends.cudnn.allow_tf32)}


def to_device(th: ModuleType, array: np.ndarray, device: torch.device) -> torch.Tensor:
    """One input as the backend moves it: on CUDA through pinned memory, without waiting."""
    tensor = th.from_numpy(np.ascontiguousarray(array))
    if device.type == "cuda":
        tensor = tensor.pin_memory().to(device, non_blocking=True)
    return tensor


def transfer_discipline(device_type: str, resident: bool = False) -> str:
    if resident:
        return (f"samples on the device, rows in (pinned, non-blocking), "
                f"{RESIDENT_IN_FLIGHT} batches in flight on their own streams")
    return "pinned, non-blocking, 2 batches in flight" if device_type == "cuda" else "none"


def graphs_wanted() -> bool:
    return os.environ.get(EAGER_ENV, "") in ("", "0")


class TorchBackend:
    name = "torch"

    def __init__(self, model: ModelSpec, threads: int | None, device_kind: str,
                 seed: int, batch_size: int | None = None) -> None:
        torch = import_torch()
        from loadgen.torchmodels import build_torch_model

        assert model.variant is not None
        self._torch = torch
        if threads:
            torch.set_num_threads(threads)
        self.device = choose_device(torch, device_kind)
        self.on_cuda = self.device.type == "cuda"
        self.math = apply_math_policy(torch, math_policy(self.device.type)) if self.on_cuda \
            else math_policy(self.device.type)
        self.spec, self.seed = model, seed
        self.input_names = INPUT_NAMES[model.name]
        self.module = place_model(torch, build_torch_model(model.name, model.variant, seed),
                                  model, self.device)
        self.concurrency = IN_FLIGHT
        self.batch_size = batch_size
        self._resident: Any = None
        self._want_outputs = True
        self._slots = threading.Semaphore(self.concurrency)
        self._finished: queue.Queue[tuple[Any, list[Any], Done] | None] = queue.Queue()
        self._waiter = threading.Thread(target=self._wait_loop, daemon=True, name="torch-wait")
        self._waiter.start()

    def _forward(self, feeds: Feeds) -> list[torch.Tensor]:
        torch = self._torch
        tensors = [to_device(torch, feeds[name], self.device) for name in self.input_names]
        with torch.inference_mode():
            return list(self.module(*tensors))

    def infer(self, feeds: Feeds) -> list[np.ndarray]:
        return [output.cpu().numpy() for output in self._forward(feeds)]

    def keep_samples(self, samples: dict[str, np.ndarray]) -> bool:
        """On CUDA, the samples go to the device once (up to RESIDENT_SAMPLES_MAX_BYTES) and
        the full batch is captured; on the CPU the host feeds stay (nothing to gain)."""
        if not self.on_cuda or not self.batch_size:
            return False
        if sum(array.nbytes for array in samples.values()) > RESIDENT_SAMPLES_MAX_BYTES:
            return False
        from loadgen.backends.torch_resident import ResidentBatches

        self._resident = ResidentBatches(
            self._torch, self.module, samples, self.input_names, self.device,
            self.batch_size, RESIDENT_IN_FLIGHT, channels_last=self._channels_last,
            graphs=graphs_wanted())
        self.concurrency = RESIDENT_IN_FLIGHT
        return True

    @property
    def _channels_last(self) -> bool:
        return self.on_cuda and self.spec.name == "resnet50"

    @property
    def keeps_samples(self) -> bool:
        return self._resident is not None

    def want_outputs(self, wanted: bool) -> None:
        """Outputs come back to the host only when the run keeps them (AccuracyOnly)."""
        self._want_outputs = wanted

    def submit_rows(self, rows: np.ndarray, done: Done) -> None:
        assert self._resident is not None
        self._resident.submit(rows, done, self._want_outputs)

    def submit(self, feeds: Feeds, done: Done) -> None:
        self._slots.acquire()
        try:
            outputs = self._forward(feeds)
            fence = None
            if self.on_cuda:
                outputs = [out.to("cpu", non_blocking=True) for out in outputs]
                fence = self._torch.cuda.Event()
                fence.record()
        except Exception as exc:
            self._slots.release()
            done(None, exc)
            return
        self._finished.put((fence, outputs, done))

    def _wait_loop(self) -> None:
        while (job := self._finished.get()) is not None:
            fence, outputs, done = job
            try:
                if fence is not None:
                    fence.synchronize()
                arrays = [tensor.numpy() for tensor in outputs]
            except Exception as exc:
                self._slots.release()
                done(None, exc)
                continue
            self._slots.release()
            done(arrays, None)

    def describe(self) -> dict[str, Any]:
        torch = self._torch
        cudnn = torch.backends.cudnn
        return {
            "name": self.name,
            "torch_version": torch.__version__,
            "cuda_version": torch.version.cuda,
            "cudnn_version": cudnn.version() if cudnn.is_available() else None,
            "execution_provider": PROVIDERS[self.device.type],
            "device": str(self.device),
            "device_name": torch.cuda.get_device_name(self.device) if self.on_cuda else None,
            "precision": self.spec.precision,
            "weight_seed": self.seed,
            "intra_op_threads": torch.get_num_threads(),
            "in_flight": self.concurrency,
            "channels_last": self._channels_last,
            "transfer": transfer_discipline(self.device.type, self.keeps_samples),
            "math": self.math,
            "batch_size": self.batch_size,
            **(self._resident.describe() if self._resident is not None
               else {"samples_on_device": False}),
        }

    def mark_statistics_start(self) -> None:
        return None

    def statistics(self) -> dict[str, Any] | None:
        return None

    def close(self) -> None:
        if self._resident is not None:
            self._resident.close()
            self._resident = None
        self._finished.put(None)
        self._waiter.join(timeout=60)
        self.module = None
        if self.on_cuda:
            self._torch.cuda.synchronize()
            self._torch.cuda.empty_cache()

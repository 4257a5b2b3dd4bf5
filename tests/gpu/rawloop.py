"""The raw loop the harness is compared with: the same torch model (loadgen.torchmodels,
the same weight seed, placed as backend torch places it) on the same synthetic inputs and
batch, submitted back to back through backend torch with no LoadGen and no SUT: the same
device path (samples resident on the GPU, rows in, the captured graph), the same batches
in flight, the same cuDNN and TF32 settings.

Runs in its own process, whose CUDA_VISIBLE_DEVICES the caller has bound, and prints one
JSON line:

    python -m tests.gpu.rawloop probe
    python -m tests.gpu.rawloop measure MODEL VARIANT PRECISION BATCH SECONDS [DEVICE]
    python -m tests.gpu.rawloop sweep MODEL VARIANT PRECISION BATCHES SECONDS [DEVICE]

``sweep`` measures each of the comma-separated BATCHES for SECONDS and chooses the
device's batch size from them (loadgen.batchsize).

DEVICE is cuda (the default) or cpu, which checks the loop itself on a machine without a
GPU.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from loadgen.backends.pytorch import import_torch
from loadgen.contract import ModelSpec
from loadgen.models import builtin_model_io
from loadgen.models.catalog import WEIGHT_SEED
from loadgen.qsl import SampleLibrary

INPUT_SEED = 0
WARMUP_BATCHES = 4
RAW_SAMPLES = 256  # resident samples, as many as the harness's performance sample count
ROW_SETS = 8  # distinct batches of rows the loop cycles through


def probe() -> dict[str, Any]:
    torch = import_torch()
    available = torch.cuda.is_available()
    return {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if available else None,
        "cuda_available": available,
        "device_name": torch.cuda.get_device_name(0) if available else None,
        "nccl": torch.distributed.is_available() and torch.distributed.is_nccl_available(),
    }


def batch_feeds(spec: ModelSpec, batch: int) -> dict[str, np.ndarray]:
    """The first ``batch`` samples the harness's sample library makes for this seed."""
    assert spec.variant is not None
    library = SampleLibrary(builtin_model_io(spec.name, spec.variant, spec.precision),
                            INPUT_SEED, batch)
    library.load(list(range(batch)))
    return library.batch(np.arange(batch))


def measure(spec: ModelSpec, batch: int, seconds: float,
            device_type: str = "cuda") -> dict[str, Any]:
    """Batches submitted back to back through backend torch itself, so that the raw loop
    moves data exactly as the harness does (on CUDA: the samples resident on the device,
    rows in, the captured graph, the same batches in flight; the same cuDNN and TF32
    settings) and the ratio measures only what LoadGen and the SUT add."""
    from loadgen.backends.pytorch import TorchBackend

    assert spec.variant is not None
    backend = TorchBackend(spec, None, "gpu" if device_type == "cuda" else "cpu", WEIGHT_SEED,
                           batch_size=batch)
    library = SampleLibrary(builtin_model_io(spec.name, spec.variant, spec.precision),
                            INPUT_SEED, max(batch, RAW_SAMPLES))
    library.preload()
    library.load(list(range(library.total_count)))
    assert library.preloaded is not None
    resident = backend.keep_samples(library.preloaded)
    backend.want_outputs(False)  # as in a performance run: nothing copied back
    feeds = library.batch(np.arange(batch))
    for _ in range(WARMUP_BATCHES):
        backend.infer(feeds)
    count = library.total_count
    row_sets = [np.arange(k * batch, (k + 1) * batch) % count for k in range(ROW_SETS)]
    finished: list[BaseException | None] = []

    def done(outputs: list[np.ndarray] | None, error: BaseException | None) -> None:
        finished.append(error)

    def submit(k: int) -> None:
        if resident:
            backend.submit_rows(row_sets[k % ROW_SETS], done)
        else:
            backend.submit(feeds, done)

    submitted, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        submit(submitted)
        submitted += 1
    described = backend.describe()
    backend.close()  # waits for the batches still in flight
    elapsed = time.perf_counter() - started
    errors = [repr(error) for error in finished if error is not None]
    if errors or len(finished) != submitted:
        raise RuntimeError(f"raw loop: {len(finished)} of {submitted} batches finished, "
                           f"errors {errors[:3]}")
    return {"samples_per_second": submitted * batch / elapsed, "batches": submitted,
            "batch_size": batch, "seconds": elapsed, "backend": described}


def sweep(spec: ModelSpec, batches: Sequence[int], seconds: float,
          device_type: str = "cuda") -> dict[str, Any]:
    """Each batch size's raw rate (0 where it failed, e.g. out of memory) and the choice."""
    from loadgen.batchsize import choose_batch

    rates: dict[int, float] = {}
    errors: dict[int, str] = {}
    for batch in batches:
        try:
            rates[batch] = float(measure(spec, batch, seconds, device_type)
                                 ["samples_per_second"])
        except Exception as exc:  # a size the device cannot hold is no candidate
            rates[batch], errors[batch] = 0.0, f"{type(exc).__name__}: {exc}"[:300]
    return {"rates": {str(b): r for b, r in rates.items()}, "errors": errors,
            "chosen": choose_batch(rates), "seconds_each": seconds}


def main(argv: Sequence[str]) -> int:
    if list(argv[:1]) == ["probe"]:
        print(json.dumps(probe()))
        return 0
    if list(argv[:1]) == ["sweep"] and len(argv) in (6, 7):
        model, variant, precision, batches, seconds = argv[1:6]
        device = argv[6] if len(argv) == 7 else "cuda"
        print(json.dumps(sweep(ModelSpec(model, variant, precision),
                               [int(b) for b in batches.split(",")], float(seconds), device)))
        return 0
    if len(argv) not in (6, 7) or argv[0] != "measure":
        print(__doc__, file=sys.stderr)
        return 2
    model, variant, precision, batch, seconds = argv[1:6]
    device = argv[6] if len(argv) == 7 else "cuda"
    spec = ModelSpec(model, variant, precision)
    print(json.dumps(measure(spec, int(batch), float(seconds), device)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

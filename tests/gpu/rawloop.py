"""The raw loop the harness is compared with: the same torch model (loadgen.torchmodels,
the same weight seed, placed as backend torch places it) on the same synthetic inputs and
batch, run back to back with no LoadGen and no SUT: copy in, forward, copy out.

Runs in its own process, whose CUDA_VISIBLE_DEVICES the caller has bound, and prints one
JSON line:

    python -m tests.gpu.rawloop probe
    python -m tests.gpu.rawloop measure MODEL VARIANT PRECISION BATCH SECONDS [DEVICE]

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

from loadgen.backends.pytorch import import_torch, place_model
from loadgen.contract import INPUT_NAMES, ModelSpec
from loadgen.models import builtin_model_io
from loadgen.models.catalog import WEIGHT_SEED
from loadgen.qsl import SampleLibrary

INPUT_SEED = 0
WARMUP_BATCHES = 4


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
    torch = import_torch()
    from loadgen.torchmodels import build_torch_model

    assert spec.variant is not None
    device = torch.device(device_type, 0) if device_type == "cuda" else torch.device("cpu")
    model = place_model(torch, build_torch_model(spec.name, spec.variant, WEIGHT_SEED), spec,
                        device)
    feeds = batch_feeds(spec, batch)
    names = INPUT_NAMES[spec.name]

    def step() -> list[Any]:
        tensors = [torch.from_numpy(feeds[name]).to(device) for name in names]
        with torch.inference_mode():
            return [output.cpu() for output in model(*tensors)]

    for _ in range(WARMUP_BATCHES):
        step()
    batches, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        step()
        batches += 1
    return {"samples_per_second": batches * batch / elapsed, "batches": batches,
            "batch_size": batch, "seconds": elapsed}


def main(argv: Sequence[str]) -> int:
    if list(argv[:1]) == ["probe"]:
        print(json.dumps(probe()))
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

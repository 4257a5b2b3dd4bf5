"""The batch size a device class runs a model at, chosen by a short probe: a whole H200
wants far larger batches than a 1g slice. The probe times a few candidate sizes on the
device (the raw loop, tests/gpu/rawloop.py ``sweep``) and the choice is the smallest size
within NEAR_BEST of the best rate: larger batches past that point add latency and memory,
not throughput."""

from __future__ import annotations

from collections.abc import Mapping

NEAR_BEST = 0.95
CANDIDATES = {"resnet50": (32, 64, 128, 256), "bert": (8, 16, 32)}


def choose_batch(rates: Mapping[int, float], near_best: float = NEAR_BEST) -> int:
    """The smallest batch whose rate is at least ``near_best`` of the best one."""
    measured = {batch: rate for batch, rate in rates.items() if rate > 0}
    if not measured:
        raise ValueError("no batch size was measured")
    best = max(measured.values())
    return min(batch for batch, rate in measured.items() if rate >= near_best * best)


def device_class(name: str, mig_profile: str | None = None) -> str:
    """What a probed batch size holds for: the GPU model, and the MIG profile on a slice."""
    return f"{name} MIG {mig_profile}" if mig_profile else name

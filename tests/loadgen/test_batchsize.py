"""The batch size chosen from a probe: the smallest within 5% of the best rate."""

from __future__ import annotations

import pytest

from loadgen.batchsize import CANDIDATES, choose_batch, device_class


def test_the_smallest_batch_near_the_best_rate_is_chosen() -> None:
    # a whole GPU: throughput still grows up to 128, then flattens
    assert choose_batch({32: 7_400.0, 64: 11_000.0, 128: 16_100.0, 256: 16_800.0}) == 128
    # a small slice saturates early
    assert choose_batch({32: 2_300.0, 64: 2_350.0, 128: 2_360.0, 256: 2_340.0}) == 32
    assert choose_batch({8: 800.0, 16: 1_500.0, 32: 0.0}) == 16  # 32 failed to run
    assert choose_batch({8: 800.0, 16: 820.0}, near_best=1.0) == 16


def test_nothing_measured_is_an_error() -> None:
    with pytest.raises(ValueError, match="no batch size"):
        choose_batch({64: 0.0})


def test_device_classes_and_candidates() -> None:
    assert device_class("NVIDIA H200") == "NVIDIA H200"
    assert device_class("NVIDIA H100 80GB HBM3", "1g.10gb") == "NVIDIA H100 80GB HBM3 MIG 1g.10gb"
    assert set(CANDIDATES) == {"resnet50", "bert"}
    assert all(list(sizes) == sorted(sizes) for sizes in CANDIDATES.values())

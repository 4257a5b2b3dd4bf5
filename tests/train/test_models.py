"""The ResNets the training harness builds, and the memory estimate vgpu makes from the
contract's shapes without torch (checked here against the models on torch's meta device)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the train extra (torch) is not installed")

from loadgen.contract import TRAINING_SHAPES  # noqa: E402
from loadgen.train.models import (  # noqa: E402
    activation_bytes_per_sample,
    build_model,
    parameter_count,
)
from vgpu.train.memory import estimate_training_memory, resnet_counts  # noqa: E402

pytestmark = pytest.mark.train


def test_resnet50_has_the_reference_parameter_count() -> None:
    # torchvision's resnet50 (v1.5, bottlenecks 3-4-6-3, 1000 classes) has exactly this many.
    assert parameter_count("resnet50") == 25_557_032


def test_resnet50_has_16_bottlenecks_in_3_4_6_3() -> None:
    model = build_model("resnet50")
    assert [len(stage) for stage in model.stages] == [3, 4, 6, 3]
    assert model.stages[1][0].conv2.stride == (2, 2)  # v1.5: stride on the 3x3


def test_tiny_resnet_trains_on_16px_images() -> None:
    torch.manual_seed(0)
    model = build_model("resnet-tiny")
    images, labels = torch.randn(4, 3, 16, 16), torch.tensor([0, 1, 2, 3])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for _ in range(5):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert model(images).shape == (4, 10)
    assert losses[-1] < losses[0]


def test_activation_memory_scales_with_image_area_and_precision() -> None:
    full = activation_bytes_per_sample("resnet50", 224, 4)
    assert activation_bytes_per_sample("resnet50", 112, 4) == pytest.approx(full / 4, rel=0.02)
    assert activation_bytes_per_sample("resnet50", 224, 2) == full / 2
    assert 60e6 < full < 120e6  # tens of MB per 224px image in fp32


def test_study_batch_fits_an_80gb_gpu_but_not_a_10gb_slice() -> None:
    estimate = estimate_training_memory("resnet50", 224, 1024, "fp16", on_gpu=True)
    assert estimate.total_bytes < 80e9
    assert estimate.total_bytes > 10e9
    fits = estimate.largest_batch(10e9)
    assert 0 < fits < 1024
    smaller = estimate_training_memory("resnet50", 224, fits, "fp16", on_gpu=True)
    assert smaller.total_bytes <= 10e9


@pytest.mark.parametrize("name", sorted(TRAINING_SHAPES))
@pytest.mark.parametrize("image_size", [8, 17, 32, 224, 225])
def test_counts_from_the_contract_shape_match_the_harness_model(name: str,
                                                                image_size: int) -> None:
    parameters, elements = resnet_counts(TRAINING_SHAPES[name], image_size)
    assert parameters == parameter_count(name)
    assert elements == activation_bytes_per_sample(name, image_size, 1)

"""The ResNets the training harness builds, and the memory estimate vgpu makes from the
contract's shapes without torch (checked here against the models on torch's meta device)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the train extra (torch) is not installed")

from loadgen.contract import TRAINING_SHAPES  # noqa: E402
from loadgen.train.models import build_model  # noqa: E402
from vgpu.train.memory import estimate_training_memory, resnet_counts  # noqa: E402

pytestmark = pytest.mark.train
nn = torch.nn


# The oracle: counts taken from the harness's torch models on the meta device (no memory
# used), which vgpu's torch-free estimate must match.
def activation_bytes_per_sample(name: str, image_size: int, bytes_per_element: float) -> float:
    """Bytes kept for backward per input sample, counted on the meta device (no memory used):
    the outputs of every leaf module, which is what autograd saves for a ResNet. In-place
    ReLUs overwrite their input, so they add nothing."""
    # eval(): batch-norm in training mode refuses one sample when a stage shrinks to 1x1.
    model = build_model(name).to("meta").eval()
    total = 0

    def count(_module: nn.Module, _inputs: object, output: torch.Tensor) -> None:
        nonlocal total
        total += output.numel()

    hooks = [
        module.register_forward_hook(count)
        for module in model.modules()
        if not list(module.children()) and not isinstance(module, nn.ReLU)
    ]
    try:
        with torch.no_grad():
            model(torch.empty(1, 3, image_size, image_size, device="meta"))
    finally:
        for hook in hooks:
            hook.remove()
    return total * bytes_per_element


def parameter_count(name: str) -> int:
    return sum(p.numel() for p in build_model(name).to("meta").parameters())


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

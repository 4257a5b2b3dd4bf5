"""Everything but the upgrade held fixed: a revalidation runs the harness image its baseline
ran, by the ID docker reported for it on the guests (stored with every instance's platform
record), so CUDA, cuDNN, ONNX Runtime, the framework and the harness with its built-in
models are the baseline's and a change in the verdict belongs to the upgrade. The image is
rebuilt only when asked; then the components that changed with it are named beside the
verdict. An image whose CUDA the new guest driver cannot run is refused before anything
changes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vgpu.container.images import HeldImage, driver_at_least, ngc_base_for_cuda
from vgpu.errors import InputError
from vgpu.results.store.records import Platform
from vgpu.results.store.result_store import ResultStore

# What a rebuilt image can change, in reading order, with the name a reader knows.
IMAGE_COMPONENTS = (
    ("cuda_version", "CUDA"), ("cudnn_version", "cuDNN"), ("tensorrt_version", "TensorRT"),
    ("ort_package", "ONNX Runtime package"), ("ort_version", "ONNX Runtime"),
    ("harness_version", "harness"),
)


class ImageCannotRun(InputError):
    """A baseline's harness image needs a newer driver than the guests get."""


@dataclass(frozen=True)
class BaselineImage:
    """The harness image a scenario's baseline ran, and the platform it recorded."""

    scenario_id: str
    image: HeldImage
    platform: Platform


def _image_platform(store: ResultStore, run_id: int) -> Platform | None:
    for item in store.instances(run_id):
        platform = item.result.platform
        if platform is not None and platform.container_image_id:
            return platform
    return None


def baseline_image(store: ResultStore, set_name: str, scenario_id: str
                   ) -> BaselineImage | None:
    """The image the scenario's runs in baseline set ``set_name`` ran in containers (the
    first of its workloads that ran in one); None where none ran in a container."""
    prefix = f"{set_name}:{scenario_id}:"
    for stored in store.baselines():
        if not stored.name.startswith(prefix):
            continue
        platform = _image_platform(store, stored.run_id)
        if platform is not None and platform.container_image_id:
            reference = platform.container_image or platform.container_image_id
            return BaselineImage(scenario_id,
                                 HeldImage(reference, platform.container_image_id), platform)
    return None


def refuse_unrunnable(images: Sequence[BaselineImage], guest_driver: str | None,
                      source: str) -> None:
    """ImageCannotRun (exit 2, before anything changes) when a baseline image's CUDA needs a
    newer driver than ``guest_driver``, the guest driver the guests are converged to."""
    if guest_driver is None:
        return
    for found in images:
        cuda = found.platform.cuda_version
        base = ngc_base_for_cuda(cuda) if cuda else None
        if base is None or driver_at_least(guest_driver, base.min_driver):
            continue
        image = found.image
        raise ImageCannotRun.single(
            source, "drivers.guest_driver",
            f"scenario {found.scenario_id}'s baseline ran harness image {image.reference} "
            f"({image.image_id}), built on CUDA {cuda}, which needs NVIDIA driver "
            f"{base.min_driver} or newer; the guests get driver {guest_driver}, under which "
            "that image cannot run",
            fix="rebuild the harness image for the new driver (the verdict then names what "
                "else changed with it: CUDA, ONNX Runtime, ...), or keep a guest driver of "
                f"{base.min_driver} or newer")


def image_notes(baseline: Platform | None, runs: Sequence[Platform]) -> list[str]:
    """What the verdict says about the image: held fixed (the baseline's ID) or changed,
    then each component of the image that changed with it."""
    if baseline is None or not baseline.container_image_id:
        return []
    ran = next((p for p in runs if p.container_image_id), None)
    if ran is None:
        return []
    before, after = baseline.container_image_id, ran.container_image_id
    if before == after:
        return [f"harness image held fixed: {ran.container_image} {after}, the baseline's"]
    changed = [f"{label} {getattr(baseline, field) or '-'} -> {getattr(ran, field) or '-'}"
               for field, label in IMAGE_COMPONENTS
               if getattr(baseline, field) != getattr(ran, field)]
    return [f"harness image changed: {baseline.container_image} {before} -> "
            f"{ran.container_image} {after}; with it: "
            + ("; ".join(changed) if changed else "no recorded component (CUDA, cuDNN, "
               "TensorRT, ONNX Runtime, harness) changed")]


def verdict_image_notes(store: ResultStore, baseline_run_id: int, series_id: str
                        ) -> list[str]:
    """``image_notes`` of a judged series against its baseline's run."""
    runs = store.runs(series_id=series_id, status="ok")
    platforms = [item.result.platform for item in store.instances(runs[0].id)
                 if item.result.platform is not None] if runs else []
    return image_notes(_image_platform(store, baseline_run_id), platforms)

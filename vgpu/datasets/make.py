"""Seeded JPEG shards shaped like the lab study's ImageNet archives: ``small`` images of
about 110 KB and ``large`` ones of about 1.3 MB on average, 1000 classes.

A few noise canvases are drawn once from the seed; each image is a window of one of them
at a random size and offset, tinted, then encoded with Pillow. Noise at a fixed amplitude
makes JPEG compress to a predictable size, so the averages hold without retrying. The
same seed and the same JPEG encoder give the same bytes (the manifest names the encoder);
``copies`` writes the set again as separate files so that a large dataset does not fit the
page cache (the study copied its own 150 times)."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from loadgen.contract import (
    DATASET_CLASSES,
    DATASET_MANIFEST,
    DatasetManifest,
    DatasetShard,
    dataset_member_name,
)


@dataclass(frozen=True)
class ImageShape:
    """How one size class is drawn: width range, aspect, noise and JPEG quality."""

    min_width: int
    max_width: int
    noise: float
    quality: int
    images_per_shard: int


SHAPES: dict[str, ImageShape] = {
    "small": ImageShape(400, 600, 22.0, 90, 256),  # ~110 KB: ImageNet's mean JPEG
    "large": ImageShape(1600, 2000, 18.0, 90, 24),  # ~1.3 MB: the study's large images
}
ASPECT = 0.75
CANVASES = 4


def _canvas(rng: np.random.Generator, width: int, height: int, noise: float) -> np.ndarray:
    from PIL import Image

    coarse = rng.integers(0, 256, (height // 16 + 1, width // 16 + 1, 3), dtype=np.uint8)
    smooth = np.asarray(Image.fromarray(coarse).resize((width, height), Image.Resampling.BICUBIC),
                        dtype=np.float32)
    grain = rng.normal(0.0, noise, (height, width, 3)).astype(np.float32)
    return np.clip(smooth + grain, 0, 255).astype(np.uint8)


class ImageMaker:
    """Draws the images of one dataset from its seed, in order."""

    def __init__(self, size: str, seed: int) -> None:
        self.shape = SHAPES[size]
        self.rng = np.random.default_rng(seed)
        width = self.shape.max_width
        height = int(width * ASPECT)
        self.canvases = [_canvas(self.rng, width + width // 4, height + height // 4,
                                 self.shape.noise) for _ in range(CANVASES)]

    def next_image(self) -> tuple[bytes, int]:
        """One JPEG and its class."""
        from PIL import Image

        rng, shape = self.rng, self.shape
        width = int(rng.integers(shape.min_width, shape.max_width + 1))
        height = int(width * ASPECT)
        canvas = self.canvases[int(rng.integers(len(self.canvases)))]
        top = int(rng.integers(canvas.shape[0] - height + 1))
        left = int(rng.integers(canvas.shape[1] - width + 1))
        tint = rng.integers(-24, 25, 3).astype(np.int16)
        window = canvas[top:top + height, left:left + width].astype(np.int16) + tint
        pixels = np.clip(window, 0, 255).astype(np.uint8)
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, "JPEG", quality=shape.quality)
        return buffer.getvalue(), int(rng.integers(DATASET_CLASSES))


def encoder_name() -> str:
    from PIL import __version__, features

    turbo = features.check_feature("libjpeg_turbo")
    library = f"libjpeg-turbo {features.version('libjpeg_turbo')}" if turbo else "libjpeg"
    return f"Pillow {__version__} ({library})"


def _write_shard(path: Path, members: list[tuple[str, bytes]]) -> None:
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as archive:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0  # the same images give the same shard bytes
            info.mode = 0o644
            archive.addfile(info, io.BytesIO(data))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def shard_file(copy: int, index: int) -> str:
    return f"shards/train-{copy:03d}-{index:05d}.tar"


def make_dataset(
    folder: Path, images: int, size: str, copies: int = 1, seed: int = 0,
    images_per_shard: int | None = None,
    progress: Callable[[int, int], None] = lambda _done, _total: None,
) -> DatasetManifest:
    """Writes the shards and ``manifest.json`` into ``folder``; returns the manifest."""
    shape = SHAPES[size]
    per_shard = images_per_shard or shape.images_per_shard
    if (folder / DATASET_MANIFEST).is_file():  # a dataset made before: replaced as a whole
        (folder / DATASET_MANIFEST).unlink()
        shutil.rmtree(folder / "shards", ignore_errors=True)
    (folder / "shards").mkdir(parents=True, exist_ok=True)
    maker = ImageMaker(size, seed)
    first_copy: list[DatasetShard] = []
    for index, start in enumerate(range(0, images, per_shard)):
        count = min(per_shard, images - start)
        members = []
        for number in range(start, start + count):
            data, label = maker.next_image()
            members.append((dataset_member_name(number, label), data))
        path = folder / shard_file(0, index)
        _write_shard(path, members)
        first_copy.append(DatasetShard(shard_file(0, index), path.stat().st_size, count,
                                _sha256(path), 0))
        progress(start + count, images)
    shards = list(first_copy)
    for copy in range(1, copies):
        for index, shard in enumerate(first_copy):
            target = shard_file(copy, index)
            shutil.copyfile(folder / shard.file, folder / target)
            shards.append(DatasetShard(target, shard.bytes, shard.images, shard.sha256, copy))
    manifest = DatasetManifest(size, images, copies, seed, per_shard, tuple(shards),
                        encoder_name())
    (folder / DATASET_MANIFEST).write_text(json.dumps(manifest.to_json(), indent=2) + "\n")
    return manifest

"""The file-fed input pipeline of one rank: DataLoader worker processes read tar shards,
decode each JPEG with Pillow (libjpeg-turbo), take a random crop and resize it, and hand
whole uint8 batches to the rank, which normalises them on its device.

Decoding uses JPEG's DCT scaling (Pillow's ``draft``): only as many pixels as the crop
needs at the output size are decoded, as DALI's and nvJPEG's region decode do on a GPU.
Every batch carries what its worker measured (bytes read, seconds reading, seconds
decoding), so the rank can say what fed it and what held it back."""

from __future__ import annotations

import io
import math
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from loadgen.train.shards import Shard, label_of, open_shard, read_manifest, shard_members

# RandomResizedCrop's usual ranges (torchvision / the reference ResNet50 recipe).
CROP_SCALE = (0.08, 1.0)
CROP_RATIO = (3 / 4, 4 / 3)
MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)
PREFETCH_BATCHES = 2  # per worker


@dataclass(frozen=True)
class Reader:
    """Which shards one worker of one rank reads, in what order."""

    shards: tuple[Shard, ...]
    shared: bool  # fewer shards than readers: a shard is read by several readers


def assign_shards(shards: tuple[Shard, ...], reader: int, readers: int) -> Reader:
    """Disjoint slices when there are enough shards (like DistributedSampler); else every
    reader cycles through all of them from its own starting shard."""
    if len(shards) >= readers:
        return Reader(shards[reader::readers], shared=False)
    start = reader % len(shards)
    return Reader(shards[start:] + shards[:start], shared=True)


def crop_box(width: int, height: int, rng: random.Random) -> tuple[int, int, int, int]:
    """A RandomResizedCrop window (left, top, right, bottom); the whole image when ten
    draws find none."""
    area = width * height
    for _ in range(10):
        target = area * rng.uniform(*CROP_SCALE)
        ratio = math.exp(rng.uniform(math.log(CROP_RATIO[0]), math.log(CROP_RATIO[1])))
        w = round(math.sqrt(target * ratio))
        h = round(math.sqrt(target / ratio))
        if 0 < w <= width and 0 < h <= height:
            left = rng.randint(0, width - w)
            top = rng.randint(0, height - h)
            return left, top, left + w, top + h
    return 0, 0, width, height


def decode_crop(data: bytes, size: int, rng: random.Random) -> np.ndarray:
    """One JPEG -> a random crop resized to size x size, HWC uint8."""
    from PIL import Image

    image = Image.open(io.BytesIO(data))
    width, height = image.size
    left, top, right, bottom = crop_box(width, height, rng)
    side = max(1, min(right - left, bottom - top))
    # Decode at the coarsest DCT scale that still leaves the crop at least ``size`` wide.
    image.draft("RGB", (math.ceil(width * size / side), math.ceil(height * size / side)))
    scale_x, scale_y = image.size[0] / width, image.size[1] / height
    box = (left * scale_x, top * scale_y, right * scale_x, bottom * scale_y)
    resized = image.convert("RGB").resize((size, size), Image.Resampling.BILINEAR, box=box)
    return np.asarray(resized)


class ShardBatches(IterableDataset[dict[str, Any]]):
    """Endless batches of one rank, each made by one worker from its own shards."""

    def __init__(self, root: str, shards: tuple[Shard, ...], batch_size: int,
                 image_size: int, classes: int, seed: int, rank: int, world_size: int) -> None:
        self.root, self.shards = root, shards
        self.batch_size, self.image_size, self.classes = batch_size, image_size, classes
        self.seed, self.rank, self.world_size = seed, rank, world_size

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        reader = assign_shards(self.shards, self.rank * workers + worker,
                               self.world_size * workers)
        rng = random.Random(self.seed * 1_000_003 + self.rank * 1009 + worker)
        images: list[np.ndarray] = []
        labels: list[int] = []
        stats = {"bytes": 0, "read_s": 0.0, "decode_s": 0.0}
        while True:
            for shard in reader.shards:
                for name, data, read_s in _timed_members(self.root, shard):
                    stats["bytes"] += len(data)
                    stats["read_s"] += read_s
                    started = time.perf_counter()
                    images.append(decode_crop(data, self.image_size, rng))
                    stats["decode_s"] += time.perf_counter() - started
                    labels.append(label_of(name) % self.classes)
                    if len(images) == self.batch_size:
                        yield _batch(images, labels, stats, reader.shared)
                        images, labels = [], []
                        stats = {"bytes": 0, "read_s": 0.0, "decode_s": 0.0}


def _timed_members(root: str, shard: Shard) -> Iterator[tuple[str, bytes, float]]:
    """The shard's members with the seconds spent reading each (opening the shard counts
    toward its first member)."""
    started = time.perf_counter()
    with open_shard(root, shard) as stream:
        members = shard_members(stream)
        while True:
            try:
                name, data = next(members)
            except StopIteration:
                return
            yield name, data, time.perf_counter() - started
            started = time.perf_counter()


def _batch(images: list[np.ndarray], labels: list[int], stats: dict[str, Any],
           shared: bool) -> dict[str, Any]:
    pixels = torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2).contiguous()
    return {"pixels": pixels, "labels": torch.tensor(labels, dtype=torch.int64),
            "count": len(labels), "shared_shards": shared, **stats}


def batch_loader(root: str, batch_size: int, image_size: int, classes: int, seed: int,
                 rank: int, world_size: int, workers: int) -> DataLoader[dict[str, Any]]:
    manifest = read_manifest(root)
    batches = ShardBatches(root, manifest.shards, batch_size, image_size, classes, seed,
                           rank, world_size)
    return DataLoader(batches, batch_size=None, num_workers=workers,
                      prefetch_factor=PREFETCH_BATCHES, persistent_workers=False)


def normalise(pixels: torch.Tensor, device: torch.device) -> torch.Tensor:
    """uint8 NCHW on the host -> normalised float NCHW on the device."""
    mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1)
    std = torch.tensor(STD, device=device).view(1, 3, 1, 1)
    return (pixels.to(device, non_blocking=True).float() - mean) / std

"""The on-disk form of a training dataset that ``vgpu data make`` writes and the harness
reads: tar shards of JPEG files (``<index>_<class>.jpg``, the class in the name) and a
``manifest.json`` listing every shard with its size, image count and sha256.

Standard library only: the orchestrator writes this format, the harness reads it."""

from __future__ import annotations

import json
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

MANIFEST = "manifest.json"
FORMAT = "vgpu-jpeg-shards"
FORMAT_VERSION = 1
NUM_CLASSES = 1000
SIZES = ("small", "large")


@dataclass(frozen=True)
class Shard:
    file: str  # relative to the dataset's folder
    bytes: int
    images: int
    sha256: str
    copy: int

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "bytes": self.bytes, "images": self.images,
                "sha256": self.sha256, "copy": self.copy}


@dataclass(frozen=True)
class Manifest:
    size: str
    images: int  # in one copy
    copies: int
    seed: int
    images_per_shard: int
    shards: tuple[Shard, ...]
    encoder: str  # the JPEG encoder that made the bytes (the hashes depend on it)

    @property
    def total_bytes(self) -> int:
        return sum(s.bytes for s in self.shards)

    @property
    def total_images(self) -> int:
        return sum(s.images for s in self.shards)

    @property
    def mean_image_bytes(self) -> float:
        return self.total_bytes / self.total_images if self.total_images else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT, "format_version": FORMAT_VERSION, "size": self.size,
            "images": self.images, "copies": self.copies, "seed": self.seed,
            "classes": NUM_CLASSES, "images_per_shard": self.images_per_shard,
            "encoder": self.encoder, "total_bytes": self.total_bytes,
            "total_images": self.total_images,
            "mean_image_bytes": round(self.mean_image_bytes, 1),
            "shards": [s.to_json() for s in self.shards],
        }


def manifest_from_json(data: dict[str, Any]) -> Manifest:
    if data.get("format") != FORMAT or data.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"not a {FORMAT} v{FORMAT_VERSION} manifest "
                         f"(format {data.get('format')!r} v{data.get('format_version')!r})")
    shards = tuple(Shard(s["file"], int(s["bytes"]), int(s["images"]), s["sha256"],
                         int(s["copy"])) for s in data["shards"])
    return Manifest(data["size"], int(data["images"]), int(data["copies"]), int(data["seed"]),
                    int(data["images_per_shard"]), shards, str(data["encoder"]))


def member_name(index: int, label: int) -> str:
    return f"{index:08d}_{label:03d}.jpg"


def label_of(name: str) -> int:
    """The class of a member named by :func:`member_name`."""
    return int(name.rsplit("_", 1)[1].split(".", 1)[0])


def is_url(path: str) -> bool:
    return path.startswith(("http://", "https://"))


def read_manifest(path: str) -> Manifest:
    """The manifest of the dataset in folder ``path`` (or at an http(s) URL)."""
    if is_url(path):
        from urllib.request import urlopen

        with urlopen(f"{path.rstrip('/')}/{MANIFEST}", timeout=60) as response:
            return manifest_from_json(json.load(response))
    return manifest_from_json(json.loads((Path(path) / MANIFEST).read_text()))


def open_shard(root: str, shard: Shard) -> IO[bytes]:
    if is_url(root):
        from urllib.request import urlopen

        response: IO[bytes] = urlopen(f"{root.rstrip('/')}/{shard.file}", timeout=60)
        return response
    return open(Path(root) / shard.file, "rb")


def shard_members(stream: IO[bytes]) -> Iterator[tuple[str, bytes]]:
    """(name, JPEG bytes) of every file in a tar shard, read as a stream, in order."""
    with tarfile.open(fileobj=stream, mode="r|") as archive:
        for member in archive:
            if not member.isfile():
                continue
            handle = archive.extractfile(member)
            if handle is not None:
                yield member.name, handle.read()

"""Reading a training dataset that ``vgpu data make`` wrote (its form is the contract's:
``loadgen.contract.Manifest``): the manifest, then each tar shard as a stream of
``(name, JPEG bytes)``, from a folder or an http(s) URL."""

from __future__ import annotations

import json
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from loadgen.contract import DATASET_MANIFEST as MANIFEST
from loadgen.contract import DatasetManifest as Manifest
from loadgen.contract import DatasetShard as Shard
from loadgen.contract import manifest_from_json

__all__ = ["MANIFEST", "Manifest", "Shard", "is_url", "label_of", "open_shard",
           "read_manifest", "shard_members"]

def label_of(name: str) -> int:
    """The class of a member named by :func:`loadgen.contract.dataset_member_name`."""
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

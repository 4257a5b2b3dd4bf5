"""Checking `vgpu data make`'s inputs, and the datasets vgpu keeps in its cache folder for
runs on this machine (made once, reused while their manifest and files match)."""

from __future__ import annotations

import json
from pathlib import Path

from loadgen.contract import (
    DATASET_MANIFEST,
    DATASET_SIZES,
    DatasetManifest,
    manifest_from_json,
)
from vgpu.datasets.make import make_dataset
from vgpu.errors import InputError, Problem
from vgpu.runpaths import cache_dir

SOURCE = "command line"
MAX_COPIES = 10_000


def check_request(folder: Path, images: int, size: str, copies: int, seed: int,
                  images_per_shard: int | None = None) -> None:
    """Every problem with the request at once, each naming its option and the fix."""
    problems: list[Problem] = []

    def problem(option: str, message: str, fix: str) -> None:
        problems.append(Problem(file=SOURCE, field=option, message=message, fix=fix))

    if images < 1:
        problem("--images", f"must be >= 1, got {images}", "give the number of images, "
                "e.g. --images 2000")
    if size not in DATASET_SIZES:
        problem("--size", f"unknown size {size!r}", f"use one of {', '.join(DATASET_SIZES)} "
                "(about 110 KB or 1.3 MB per image)")
    if not 1 <= copies <= MAX_COPIES:
        problem("--copies", f"must be between 1 and {MAX_COPIES}, got {copies}",
                "give --copies 1 for one set, more to outgrow the page cache")
    if images_per_shard is not None and images_per_shard < 1:
        problem("--images-per-shard", f"must be >= 1, got {images_per_shard}",
                "leave it out for the size's default (256 small, 24 large)")
    if seed < 0:
        problem("--seed", f"must be >= 0, got {seed}", "give a non-negative integer seed")
    if folder.exists() and not folder.is_dir():
        problem("DIR", f"{folder} is a file", "give a new or empty folder")
    elif folder.is_dir() and any(folder.iterdir()) and not (folder / DATASET_MANIFEST).is_file():
        problem("DIR", f"{folder} holds files that are not a vgpu dataset",
                "give a new or empty folder (or one `vgpu data make` wrote before)")
    if problems:
        raise InputError(problems)


def read_manifest(folder: Path) -> DatasetManifest:
    return manifest_from_json(json.loads((folder / DATASET_MANIFEST).read_text()))


def dataset_matches(folder: Path, images: int, size: str, copies: int, seed: int) -> bool:
    """Whether ``folder`` holds this very dataset, every shard present at its size."""
    try:
        manifest = read_manifest(folder)
    except (OSError, ValueError, KeyError, json.JSONDecodeError):
        return False
    if (manifest.images, manifest.size, manifest.copies, manifest.seed) != (
            images, size, copies, seed):
        return False
    return all((folder / s.file).is_file() and (folder / s.file).stat().st_size == s.bytes
               for s in manifest.shards)


def cached_dataset_folder(images: int, size: str, copies: int, seed: int) -> Path:
    return cache_dir() / "datasets" / f"{size}-{images}-x{copies}-seed{seed}"


def ensure_dataset(images: int, size: str, copies: int = 1, seed: int = 0,
                   folder: Path | None = None,
                   images_per_shard: int | None = None) -> tuple[Path, DatasetManifest, bool]:
    """The dataset in ``folder`` (default: vgpu's cache), made when it is not there yet.
    Returns the folder, its manifest and whether it was made now."""
    where = folder or cached_dataset_folder(images, size, copies, seed)
    if dataset_matches(where, images, size, copies, seed):
        return where, read_manifest(where), False
    return where, make_dataset(where, images, size, copies, seed, images_per_shard), True

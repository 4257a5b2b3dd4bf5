"""`vgpu data make`: the seeded JPEG dataset that file-fed training reads."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from vgpu.cli.common import console
from vgpu.cli.root import app

data_app = typer.Typer(help="Datasets for file-fed training (JPEG shards vgpu makes itself).",
                       no_args_is_help=True)
app.add_typer(data_app, name="data")


@data_app.command("make")
def make_command(
    folder: Annotated[Path, typer.Argument(metavar="DIR", help="folder to write (new, empty "
                                           "or an earlier vgpu dataset, which is replaced)")],
    images: Annotated[int, typer.Option("--images", help="images in one copy of the set")],
    size: Annotated[str, typer.Option("--size", help="small (about 110 KB a JPEG, like "
                                      "ImageNet) or large (about 1.3 MB)")] = "small",
    copies: Annotated[int, typer.Option("--copies", help="write the set this many times as "
                                        "separate files (a dataset larger than the page "
                                        "cache)")] = 1,
    seed: Annotated[int, typer.Option("--seed", help="same seed, same bytes (with the same "
                                      "JPEG encoder, named in the manifest)")] = 0,
    images_per_shard: Annotated[int | None, typer.Option(
        "--images-per-shard", help="images in one tar shard (default 256 small, 24 large: "
        "about 30 MB shards)")] = None,
) -> None:
    """Write seeded, reproducible JPEG shards (1000 classes) and manifest.json with every
    shard's sha256, size and image count."""
    from vgpu.datasets.make import make_dataset
    from vgpu.datasets.store import check_request

    check_request(folder, images, size, copies, seed, images_per_shard)
    started = time.perf_counter()
    manifest = make_dataset(folder, images, size, copies, seed, images_per_shard)
    seconds = time.perf_counter() - started
    console.print(
        f"{folder}: {manifest.total_images} images in {len(manifest.shards)} shards "
        f"({manifest.copies} cop{'y' if manifest.copies == 1 else 'ies'}), "
        f"{manifest.total_bytes / 1e6:.1f} MB, mean {manifest.mean_image_bytes / 1e3:.0f} KB "
        f"per image, {manifest.encoder}, {seconds:.1f} s", markup=False, highlight=False)

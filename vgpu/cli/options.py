"""Command-line options that several commands share, declared once: the scenario given as
FILE or --scenario ID, the inventory, the results database, JSON output, and where the
harness runs (container image or host venv)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from vgpu.container.images import DEFAULT_BASE_IMAGE

ScenarioFile = Annotated[Path | None, typer.Argument(help="scenario YAML file",
                                                     show_default=False)]
ScenarioRef = Annotated[str | None, typer.Option(
    "--scenario", "-s", help="catalogue scenario id, e.g. 6 (see `vgpu scenarios`)")]
InventoryOpt = Annotated[Path | None, typer.Option(
    "--inventory", "-i", help="inventory YAML (or the name of one in inventory/)")]
InventoryReq = Annotated[Path, typer.Option(
    "--inventory", "-i", help="inventory YAML (or the name of one in inventory/)")]
DbOpt = Annotated[Path, typer.Option("--db", help="results database (SQLite file)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="machine-readable output on stdout")]
RunsOpt = Annotated[int | None, typer.Option(
    "--runs", help="repeats (default: the scenario's, usually 3)")]
FullModelsOpt = Annotated[bool, typer.Option(
    "--full-models", help="on a CPU, keep the scenario's model sizes instead of the small "
    "functional check")]
RuntimeOpt = Annotated[str | None, typer.Option(
    "--runtime", help="container: each harness instance in its own container of the harness "
    "image; host: the harness venv (default: the scenario's guest.runtime on its VMs and "
    "hosts, host on this machine)")]
ImageOpt = Annotated[str | None, typer.Option(
    "--image", help="harness image tag for --runtime container here (default "
    "vgpu-harness:<version>; built when the daemon lacks it)")]
BaseImageOpt = Annotated[str, typer.Option(
    "--base-image", help="base the harness image is built FROM when it is missing here")]
DockerHostOpt = Annotated[str | None, typer.Option(
    "--docker-host", help="docker daemon address for --runtime container here, e.g. "
    "unix:///run/docker.sock (default: docker's own)")]
DEFAULT_BASE = DEFAULT_BASE_IMAGE

"""Core commands: version."""

from __future__ import annotations

import typer

from vgpu import __version__
from vgpu.cli import app


@app.command()
def version() -> None:
    """Print the vgpu version."""
    typer.echo(__version__)

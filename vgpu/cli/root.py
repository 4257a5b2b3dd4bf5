"""The root ``vgpu`` Typer app and the error console: what every CLI module registers its
commands on, kept apart from ``vgpu.cli`` (which imports those modules) so that no import
goes in a circle."""

from __future__ import annotations

import typer
from rich.console import Console

app = typer.Typer(
    name="vgpu",
    help="Declarative vGPU/MIG labs on vSphere, benchmarked with MLPerf LoadGen and "
    "judged against bare metal.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
err_console = Console(stderr=True, soft_wrap=True)

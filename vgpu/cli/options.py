"""Command-line options that several commands share, declared once: the scenario given as
FILE or --scenario ID, the inventory, the results database, JSON output, and where the
harness runs (container image or host venv)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from vgpu import catalog
from vgpu.cli.root import err_console
from vgpu.defaults import DB_ENV, DEFAULT_BASE_IMAGE
from vgpu.errors import InputError

if TYPE_CHECKING:
    from vgpu.site import Site

DEFAULT_REPORT = Path("vgpu-report.html")
ScenarioFile = Annotated[Path | None, typer.Argument(help="scenario YAML file",
                                                     show_default=False)]
ScenarioRef = Annotated[str | None, typer.Option(
    "--scenario", "-s", help="catalogue scenario id, e.g. 6 (see `vgpu scenarios`)")]
_INVENTORY_DEFAULTS = (f"default: ${catalog.INVENTORY_ENV}, then ./{catalog.LOCAL_INVENTORY}, "
                       "then ~/.config/vgpu/inventory.yaml")


@dataclass
class CommandInventory:
    """The running command's inventory as its --inventory option found it, and the Site
    made of it (vgpu.cli.common.site_of). The option's callback, which runs as each command
    starts, resets it, so a Site lives for one command."""

    choice: catalog.InventoryChoice | None = None
    site: Site | None = None


COMMAND_INVENTORY = CommandInventory()


def inventory_option(help_text: str = "inventory YAML (or the name of one in inventory/)",
                     *, required: bool = False,
                     without: str = "going on without one") -> Any:
    """The --inventory option with the one resolution every command shares
    (vgpu.catalog.find_inventory), said on stderr. ``required``: finding none is an input
    error; else the command gets None and ``without`` says what it does then."""

    def resolve(ctx: typer.Context, value: Path | None) -> Path | None:
        if ctx.resilient_parsing:  # shell completion: parse only, say nothing
            return value
        choice = catalog.find_inventory(value)
        COMMAND_INVENTORY.choice, COMMAND_INVENTORY.site = choice, None
        if choice is not None:
            err_console.print(choice.describe(), markup=False, highlight=False)
            return choice.path
        if required:
            raise InputError.single(
                "command line", "--inventory",
                f"`{ctx.command_path}` needs an inventory and none was given or found",
                fix=f"pass --inventory FILE, set ${catalog.INVENTORY_ENV}, or run `vgpu sim "
                    f"up` here (it writes ./{catalog.LOCAL_INVENTORY})")
        err_console.print(f"inventory: none found (looked for {catalog.INVENTORY_SEARCH}); "
                          f"{without}", markup=False, highlight=False)
        return None

    return typer.Option("--inventory", "-i", help=f"{help_text} ({_INVENTORY_DEFAULTS})",
                        callback=resolve, show_default=False)


InventoryOpt = Annotated[Path | None, inventory_option()]
InventoryReq = Annotated[Path | None, inventory_option(required=True)]
# A file path or a postgresql:// URL, so a string: a Path would fold the URL's "//".
DbOpt = Annotated[str, typer.Option(
    "--db", envvar=DB_ENV, help="results store: a SQLite file, or a shared PostgreSQL "
    "database as postgresql://USER@HOST:PORT/DBNAME (password from PGPASSWORD or "
    "~/.pgpass)")]
HostOpt = Annotated[str | None, typer.Option(
    "--host", help="the ESXi host (as vCenter names it) every VM of the scenario goes on, "
    "e.g. the host just upgraded; refused when they do not fit there or it is in "
    "maintenance mode")]
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

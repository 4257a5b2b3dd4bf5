"""Argument handling shared by commands: a scenario given as FILE or --scenario ID, the
command's Site (its inventory, found, loaded and checked once), and one console for
output."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from vgpu import catalog
from vgpu.cli.options import COMMAND_INVENTORY
from vgpu.errors import InputError, ParameterError

if TYPE_CHECKING:
    from vgpu.model.scenario import Scenario
    from vgpu.site import Site


def _make_console() -> Console:
    probe = Console()
    # Piped output (CI logs, tickets) gets a wide fixed width instead of rich's 80 columns.
    return probe if probe.is_terminal else Console(width=160)


console = _make_console()


def scenario_from_args(file: Path | None, scenario_ref: str | None) -> Scenario:
    from vgpu.model.load import load_scenario

    if file is not None and scenario_ref is not None:
        raise InputError.single("command line", "FILE / --scenario",
                                "both a scenario file and --scenario were given",
                                fix="give one of them")
    if file is not None:
        return load_scenario(file)
    if scenario_ref is not None:
        return load_scenario(catalog.resolve(scenario_ref))
    raise InputError.single("command line", "FILE / --scenario", "no scenario given",
                            fix="pass a scenario file or --scenario ID (see `vgpu scenarios`)")


def site_of(inventory: Path | None) -> Site:
    """The command's Site for the inventory its --inventory option found (None: this
    machine alone): made the first time the command asks, then the same object for the
    rest of the command, so the inventory is found, loaded and checked once."""
    from vgpu.site import open_site

    command = COMMAND_INVENTORY
    if command.site is not None and command.site.inventory_path == inventory:
        return command.site
    choice = command.choice
    how = choice.how if choice is not None and choice.path == inventory else "--inventory"
    command.site = open_site(inventory, how)
    return command.site


@contextmanager
def flag_names(flags: dict[str, str], fixes: dict[str, str] | None = None) -> Iterator[None]:
    """The domain's ParameterErrors raised inside, told in the command's terms: ``flags``
    maps a parameter to the flag that gives it, ``fixes`` a reason to a fix worded with the
    command's flags (else the domain's fix stays)."""
    try:
        yield
    except ParameterError as exc:
        raise exc.named(flags, fixes or {}) from None


def terminal_confirm(yes: bool) -> Callable[[str], bool]:
    """--yes answers yes; otherwise ask on a terminal, and refuse to guess without one."""
    def confirm(question: str) -> bool:
        if yes:
            return True
        if not sys.stdin.isatty():
            raise InputError.single("command line", "--yes",
                                    "no terminal to ask for confirmation",
                                    fix="pass --yes to go ahead, or --dry-run to only look")
        return typer.confirm(question, default=False)
    return confirm

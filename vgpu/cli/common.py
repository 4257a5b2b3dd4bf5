"""Argument handling shared by commands: a scenario given as FILE or --scenario ID, an
optional inventory, and one console for output."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from vgpu import catalog
from vgpu.errors import InputError

if TYPE_CHECKING:
    from vgpu.model.inventory import Inventory
    from vgpu.model.scenario import Scenario


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


def inventory_from_args(path: Path | None) -> Inventory | None:
    from vgpu.model.load import load_inventory

    if path is None:
        return None
    return load_inventory(catalog.resolve_inventory(path))

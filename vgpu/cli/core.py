"""Core commands: scenarios, plan, schema, version. All pure: nothing touches a network."""

from __future__ import annotations

import json
from typing import Annotated, Literal

import typer

from vgpu import __version__, catalog
from vgpu.cli.common import console, scenario_from_args, site_of
from vgpu.cli.options import InventoryOpt, ScenarioFile, ScenarioRef
from vgpu.cli.root import app


@app.command()
def version() -> None:
    """Print the vgpu version."""
    typer.echo(__version__)


@app.command()
def scenarios(
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
) -> None:
    """List the scenario catalogue (ids usable with --scenario)."""
    from rich.table import Table

    rows = []
    for entry in catalog.catalogue():
        sc = catalog.load(entry.id)
        profiles = ", ".join(f"{' + '.join(vm.vgpus) or '-'} x{vm.count}" for vm in sc.vms)
        rows.append({"id": sc.id, "name": sc.name, "platform": sc.platform,
                     "vms": len(sc.vm_names()), "profiles": profiles,
                     "workloads": [w.label for w in sc.workloads], "file": str(entry.path)})
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table(title="vgpu scenarios")
    for col in ("id", "name", "platform", "VMs", "vGPUs", "workloads"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["id"], r["name"], r["platform"], str(r["vms"]), r["profiles"],
                      ", ".join(r["workloads"]))
    console.print(table)


@app.command()
def plan(
    file: ScenarioFile = None,
    scenario: ScenarioRef = None,
    inventory: InventoryOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the plan as JSON")] = False,
) -> None:
    """Expand a scenario into the concrete plan: VMs, GPU/MIG placement, VM settings,
    guest steps and bench matrix. Pure: touches no network."""
    sc = scenario_from_args(file, scenario)

    from vgpu.cli.plan_view import render_plan
    from vgpu.vsphere.desired.ats import nic_firmware_todos

    site = site_of(inventory)
    inv, result = site.inventory, site.plan(sc)
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
        return
    render_plan(result, console)
    if inv is not None:
        for todo in nic_firmware_todos(sc, inv, result):
            console.print(f"[yellow]host step:[/] {todo.describe()}", highlight=False)


@app.command()
def schema(
    kind: Annotated[str, typer.Argument(help="scenario or inventory")],
) -> None:
    """Print the JSON Schema of scenario or inventory files."""
    from vgpu.model.inventory import Inventory
    from vgpu.model.scenario import Scenario

    models: dict[str, type[Scenario] | type[Inventory]] = {"scenario": Scenario,
                                                           "inventory": Inventory}
    if kind not in models:
        raise typer.BadParameter(f"'{kind}' is not a schema; use scenario or inventory")
    mode: Literal["validation"] = "validation"
    typer.echo(json.dumps(models[kind].model_json_schema(mode=mode), indent=2))

"""`vgpu mig ...`: MIG layouts on this machine's GPUs (bare metal) through NVML, or on a
simulated GPU when asked for explicitly."""

from __future__ import annotations

import json
import os
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from vgpu.cli.common import console, flag_names, scenario_from_args, site_of
from vgpu.cli.options import JsonOpt, ScenarioFile, ScenarioRef, inventory_option
from vgpu.cli.root import app
from vgpu.defaults import GPU_SIMULATOR_ENV as SIMULATOR_ENV
from vgpu.errors import InputError

if TYPE_CHECKING:
    from vgpu.nvml.backend import GpuBackend
    from vgpu.nvml.state import StateStore

mig_app = typer.Typer(name="mig", no_args_is_help=True,
                      help="MIG layouts on this machine's GPUs (bare-metal baselines).")
app.add_typer(mig_app, name="mig")
notice = Console(stderr=True)



def mig_flag_names() -> AbstractContextManager[None]:
    """The MIG operations' bad parameters told with the flags that give them (--gpu,
    --enable-mig, --host) and fixes worded with those."""
    from vgpu.nvml.errors import GPU_INDEX, MIG_DISABLED, MIG_SWITCH, PLAN_HOST, TOO_FEW_GPUS

    return flag_names({GPU_INDEX: "--gpu", MIG_SWITCH: "--enable-mig", PLAN_HOST: "--host"},
                      {MIG_DISABLED: "rerun with --enable-mig when the GPU is free (or enable "
                                     "it yourself: `sudo nvidia-smi -i {gpu} -mig 1`)",
                       TOO_FEW_GPUS: "pass --gpu {needed} times"})

SimulatorOpt = Annotated[str | None, typer.Option(
    "--simulator", help=f"use a simulated GPU of this model when NVML finds no GPU (same as "
    f"{SIMULATOR_ENV}); a real GPU always wins")]
StateFileOpt = Annotated[Path | None, typer.Option(
    "--state-file", help="layout state file (default ~/.local/state/vgpu/mig-layout-<gpu>.json)")]


def _backend(simulator: str | None) -> GpuBackend:
    from vgpu.nvml.select import backend_for_this_machine

    backend = backend_for_this_machine(simulator)
    if backend.simulated:
        notice.print(f"[bold yellow]{backend.description}[/]")
    elif simulator or os.environ.get(SIMULATOR_ENV):
        notice.print(f"note: this machine has a real GPU; the simulator request "
                     f"({simulator or os.environ.get(SIMULATOR_ENV)}) is ignored")
    return backend


def _store(state_file: Path | None) -> StateStore:
    from vgpu.nvml.state import StateStore

    return StateStore(path=state_file) if state_file else StateStore()


@mig_app.command()
def status(simulator: SimulatorOpt = None, as_json: JsonOpt = False) -> None:
    """GPUs, MIG mode, GPU/compute instances and MIG device UUIDs."""
    from rich.table import Table

    from vgpu.nvml.status import snapshots

    backend = _backend(simulator)
    driver = backend.driver_info()
    snaps = snapshots(backend)
    if as_json:
        typer.echo(json.dumps({"backend": backend.description, "simulated": backend.simulated,
                               "driver": driver.__dict__,
                               "gpus": [s.to_json() for s in snaps]}, indent=2))
        return
    console.print(f"{backend.description}; driver {driver.driver_version}, "
                  f"CUDA {driver.cuda_version}")
    for s in snaps:
        g = s.gpu
        mode = s.mig_mode.describe() if s.mig_mode else s.note
        console.print(f"GPU {g.index}: {g.name} [{g.model_key or 'not in catalogue'}] "
                      f"{g.pci_bus_id} (device 0x{g.pci_device_id:04X}) {g.memory_mb} MiB, "
                      f"{g.uuid}; MIG {mode}"
                      + (f"; processes {s.processes}" if s.processes else ""))
        if s.mig_mode and s.note:
            console.print(f"  note: {s.note}")
        devices = {(d.gpu_instance_id, d.compute_instance_id): d for d in s.devices}
        if not s.instances:
            for d in s.devices:
                console.print(f"  MIG device {d.profile or '?'} (GPU instance "
                              f"{d.gpu_instance_id}, compute instance "
                              f"{d.compute_instance_id}): {d.uuid}")
            continue
        table = Table()
        for col in ("GPU instance", "profile", "start", "size", "compute instance", "MIG UUID"):
            table.add_column(col)
        for gi in s.instances:
            cis = gi.compute_instances or ()
            for ci in cis or (None,):
                device = devices.get((gi.id, ci.id)) if ci else None
                table.add_row(str(gi.id), s.profile_name(gi.profile_id), str(gi.start),
                              str(gi.size), str(ci.id) if ci else "-",
                              device.uuid if device else "-")
        console.print(table)


@mig_app.command()
def apply(
    file: ScenarioFile = None,
    scenario: ScenarioRef = None,
    gpu: Annotated[list[int] | None, typer.Option(
        "--gpu", help="local GPU index for each planned GPU (repeat; default 0, 1, ...)")] = None,
    inventory: Annotated[Path | None, inventory_option(
        "inventory YAML naming the bare-metal hosts", without="this machine")] = None,
    host: Annotated[str | None, typer.Option(
        "--host", help="this machine's name in the inventory (plans over several hosts)")]
        = None,
    enable_mig: Annotated[bool, typer.Option(
        "--enable-mig", help="switch MIG mode on if it is off (needs a GPU reset)")] = False,
    replace_existing: Annotated[bool, typer.Option(
        "--replace-existing", help="destroy instances already on the GPU if the layout needs "
        "their slices (saved; `destroy --restore` puts them back)")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="show what would change")] = False,
    state_file: StateFileOpt = None,
    simulator: SimulatorOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create a bare-metal scenario's MIG layout on this machine and verify it."""
    sc = scenario_from_args(file, scenario)

    from vgpu.nvml.baremetal import apply_layouts_here, result_lines
    from vgpu.nvml.from_plan import layouts_from_plan

    source = sc.source or f"scenario {sc.id}"
    plan = site_of(inventory).plan(sc)
    with mig_flag_names():
        specs = layouts_from_plan(plan, gpu, host=host)
    for note in plan.notes:
        if not note.startswith("no inventory"):  # bare metal here needs none
            notice.print(f"note: {note}")
    if state_file is not None and len(specs) > 1:
        raise InputError.single("command line", "--state-file", "one state file cannot hold "
                                f"the layouts of {len(specs)} GPUs", fix="leave it out")
    backend = _backend(simulator)
    with mig_flag_names():
        results = apply_layouts_here(backend, specs, lambda: _store(state_file),
                                     source=source, gpu_flag_given=gpu is not None,
                                     enable_mig=enable_mig, replace_existing=replace_existing,
                                     dry_run=dry_run, log=notice.print)
    if as_json:
        typer.echo(json.dumps({"simulated": backend.simulated, "results": [
            {"gpu": r.gpu, "dry_run": r.dry_run, "already_applied": r.already_applied,
             "actions": r.actions,
             "mig_devices": [{"owner": c.owner, "profile": c.profile, "start": c.start,
                              "uuid": c.uuid} for c in r.created]} for r in results]},
            indent=2))
        return
    for r in results:
        for line in result_lines(r):
            console.print(line)
        if r.created:
            console.print(f"GPU {r.gpu}: verified: {len(r.created)} MIG devices match the plan")


@mig_app.command()
def destroy(
    gpu: Annotated[list[int] | None, typer.Option("--gpu", help="GPU index (repeat)")] = None,
    restore: Annotated[bool, typer.Option(
        "--restore", help="also put back what was there before (instances, MIG mode)")] = False,
    state_file: StateFileOpt = None,
    simulator: SimulatorOpt = None,
) -> None:
    """Destroy the MIG instances `vgpu mig apply` created (only those)."""
    from vgpu.nvml.teardown import destroy_layout

    backend = _backend(simulator)
    for index in gpu or [g.index for g in backend.gpus()]:
        with mig_flag_names():
            result = destroy_layout(backend, index, _store(state_file), restore=restore,
                                    log=notice.print)
        for line in result.actions:
            console.print(f"GPU {index}: {line}")


@mig_app.command("verify-catalogue")
def verify_catalogue(
    gpu: Annotated[int, typer.Option("--gpu", help="GPU index")] = 0,
    simulator: SimulatorOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Compare vgpu's MIG catalogue with what NVML reports (read-only; exit 1 on a difference)."""
    from vgpu.nvml.catalogue_check import check_catalogue

    backend = _backend(simulator)
    with mig_flag_names():
        report = check_catalogue(backend, gpu)
    diffs, model = report.differences, report.model
    if as_json:
        payload: dict[str, Any] = {"gpu": gpu, "model": model.key,
                                   "simulated": backend.simulated, "notes": report.notes,
                                   "differences": [d.__dict__ for d in diffs]}
        typer.echo(json.dumps(payload, indent=2))
    else:
        for d in diffs:
            console.print(f"GPU {gpu} {model.key}: {d}")
        if not diffs:
            console.print(f"GPU {gpu} {model.key}: the catalogue matches NVML "
                          f"({len(model.profiles)} profiles)")
        for note in report.notes:
            console.print(f"note: {note}")
    if diffs:
        raise typer.Exit(1)


@mig_app.command("simulated-reset", hidden=True)
def simulated_reset(
    gpu: Annotated[int, typer.Option("--gpu")] = 0,
    simulator: SimulatorOpt = None,
) -> None:
    """Reset a simulated GPU (what `nvidia-smi --gpu-reset` does on a real one)."""
    from vgpu.nvml.simulator import SimulatedGpuBackend

    backend = _backend(simulator)
    if not isinstance(backend, SimulatedGpuBackend):
        raise InputError.single("command line", "simulated-reset", "this machine has a real "
                                "GPU", fix=f"use `sudo nvidia-smi --gpu-reset -i {gpu}`")
    mode = backend.reset(gpu)
    console.print(f"simulated GPU {gpu} reset; MIG {mode.describe()}")


CURRENT = "current"
EXPORT_FORMATS = ("mig-parted",)


@mig_app.command("export")
def export(
    file: ScenarioFile = None,
    scenario: ScenarioRef = None,
    fmt: Annotated[str, typer.Option("--format", help="output format: mig-parted")] =
    "mig-parted",
    config: Annotated[str | None, typer.Option(
        "--config", help="config name in the file (default vgpu-<scenario id>, or current)")]
        = None,
    simulator: SimulatorOpt = None,
) -> None:
    """Write a bare-metal scenario's MIG layout, or the layout on this machine's GPUs now
    (`current`, read through NVML), as an NVIDIA mig-parted config on stdout."""
    from vgpu.mig import migparted
    from vgpu.nvml.from_plan import gpu_layouts_by_host
    from vgpu.planner import build_plan

    if fmt not in EXPORT_FORMATS:
        raise InputError.single("command line", "--format", f"'{fmt}' is not an export format",
                                fix=f"use one of: {', '.join(EXPORT_FORMATS)}")
    if _wants_current(file, scenario):
        typer.echo(_current_config(config or CURRENT, simulator), nl=False)
        return
    sc = scenario_from_args(file, scenario)
    if sc.platform != "bare-metal":
        raise InputError.single(sc.source or f"scenario {sc.id}", "platform",
                                f"scenario {sc.id} runs on vSphere VMs; a mig-parted config "
                                "describes a bare-metal host's GPUs",
                                fix="export its bare-metal twin (e.g. bm8 for 8)")
    by_host = gpu_layouts_by_host(build_plan(sc, None))
    name = config or f"vgpu-{sc.id}"
    configs = {name if len(by_host) == 1 else f"{name}-{host}": layouts
               for host, layouts in by_host.items()}
    header = [f"MIG layout of vgpu scenario {sc.id} ({sc.name}) for NVIDIA mig-parted:",
              f"  nvidia-mig-parted apply -f FILE -c {next(iter(configs))}"]
    typer.echo(migparted.render(configs, sc.gpu_model, header), nl=False)


def _wants_current(file: Path | None, scenario: str | None) -> bool:
    """No scenario, `--scenario current` or a bare `current` (not a file) ask for the
    layout on this machine's GPUs."""
    named_current = file is not None and str(file) == CURRENT and not file.exists()
    if file is None or named_current:
        return scenario in (None, CURRENT) if file is None else scenario is None
    return False


def _current_config(name: str, simulator: str | None) -> str:
    from vgpu import mig
    from vgpu.mig import migparted
    from vgpu.mig.migparted import GpuLayout
    from vgpu.nvml.status import snapshots

    backend = _backend(simulator)
    layouts: list[GpuLayout] = []
    models = set()
    for snap in snapshots(backend):
        models.add(snap.gpu.model_key)
        if snap.mig_mode is None or not snap.mig_mode.current:
            layouts.append(GpuLayout(snap.gpu.index, False))
            continue
        profiles = [snap.profile_name(gi.profile_id) for gi in snap.instances] or \
            [d.profile or "?" for d in snap.devices]
        layouts.append(GpuLayout(snap.gpu.index, True, tuple(profiles)))
    key = next(iter(models)) if len(models) == 1 else None
    gpu = mig.gpu_model(key) if key else None
    header = [f"MIG layout on this machine's GPUs now ({backend.description}),",
              f"for NVIDIA mig-parted: nvidia-mig-parted apply -f FILE -c {name}"]
    return migparted.render({name: layouts}, gpu, header)

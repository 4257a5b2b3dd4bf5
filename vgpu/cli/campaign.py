"""`vgpu campaign`: a cluster upgraded host by host, each host gated by its verdict.
Parsing and printing only: the work is in vgpu.campaign, imported when a command runs."""

from __future__ import annotations

import getpass
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from vgpu.cli import common
from vgpu.cli.options import DbOpt, InventoryOpt
from vgpu.cli.root import app
from vgpu.defaults import DEFAULT_DB
from vgpu.errors import InputError
from vgpu.exitcodes import HELP as EXIT_HELP

if TYPE_CHECKING:
    from vgpu.campaign.model import Campaign
    from vgpu.campaign.runner import CampaignDirs
    from vgpu.campaign.state import CampaignState

campaign_app = typer.Typer(help="A cluster upgraded host by host, each host gated by its "
                           "verdict (docs/campaign.md).", no_args_is_help=True)
app.add_typer(campaign_app, name="campaign")

CampaignFile = Annotated[Path, typer.Argument(help="the campaign YAML", show_default=False)]
StateDirOpt = Annotated[Path, typer.Option("--state-dir", help="where campaign state is "
                                           "kept")]
ReportOpt = Annotated[Path | None, typer.Option("--report", help="HTML report of the "
                                                "campaign (JSON beside it)")]
DEFAULT_STATE = Path("vgpu-results/campaign")
DEFAULT_RESULTS = Path("vgpu-results")


def _say(text: str) -> None:
    common.console.print(text, highlight=False, markup=False)


def _who() -> str:
    return f"{getpass.getuser()}@{socket.gethostname()}"


def _dirs(state_dir: Path) -> CampaignDirs:
    from vgpu.campaign.runner import CampaignDirs

    return CampaignDirs(state=state_dir, facts=DEFAULT_RESULTS / "preflight",
                        records=DEFAULT_RESULTS / "upgrade",
                        revalidations=DEFAULT_RESULTS / "revalidate")


def _load(file: Path) -> Campaign:
    from vgpu.campaign.model import load_campaign

    return load_campaign(file)


def _saved(campaign: Campaign, state_dir: Path) -> CampaignState | None:
    from vgpu.campaign import state as saved

    return saved.load(state_dir, campaign.name)


@campaign_app.command("run")
def run_command(
    file: CampaignFile,
    inventory: InventoryOpt = None,
    resume: Annotated[bool, typer.Option(
        "--resume", help="continue the campaign's saved state after an interruption (a "
        "kill at any phase): nothing that changed the lab is done again")] = False,
    db: DbOpt = DEFAULT_DB,
    state_dir: StateDirOpt = DEFAULT_STATE,
    report: ReportOpt = Path("vgpu-campaign.html"),
) -> None:
    """Upgrade the campaign's hosts one at a time: baseline (captured where missing) ->
    drain -> upgrade -> undrain (the NVIDIA stack checked) -> revalidate --host -> gate.
    PASS moves to the next host; FAIL or a refused step stops with the host in a stated
    state and the hosts after it untouched; INCONCLUSIVE pauses for `vgpu campaign
    continue`. The lab's lease is held throughout."""
    from vgpu.campaign import state as saved

    campaign = _load(file)
    existing = _saved(campaign, state_dir)
    if existing is not None and existing.status == saved.PASSED:
        _say(f"campaign {campaign.name} passed already ({existing.path}): nothing to do")
        _finish(existing, report)
    if existing is not None and not resume:
        raise InputError.single(
            "command line", "--resume",
            f"campaign {campaign.name} is under way ({existing.status}"
            f"{': ' + existing.reason if existing.reason else ''}; state {existing.path})",
            fix=f"`vgpu campaign run {file} --resume` continues it, `vgpu campaign "
                f"continue {file}` decides a pause, `vgpu campaign abort {file}` ends it")
    if existing is not None and existing.status == saved.STOPPED:
        raise InputError.single(
            "command line", "--resume", f"campaign {campaign.name} stopped: "
            f"{existing.reason}", fix=f"fix what stopped it, then `vgpu campaign continue "
            f"{file} --rerun`, or `vgpu campaign abort {file}`")
    if existing is not None and [h.host for h in existing.hosts] != campaign.hosts:
        raise InputError.single(str(file), "hosts", "the hosts are not the ones the saved "
                                f"campaign runs ({', '.join(h.host for h in existing.hosts)})",
                                fix=f"restore the list, or `vgpu campaign abort {file}` and "
                                    "start a campaign of another name")
    state = existing or saved.new_state(state_dir, campaign.name, file, campaign.hosts)
    if existing is not None:
        state.note(f"resumed by {_who()}")
    _run(campaign, file, inventory, db, state_dir, state, report)


@campaign_app.command("continue")
def continue_command(
    file: CampaignFile,
    inventory: InventoryOpt = None,
    accept: Annotated[bool, typer.Option(
        "--accept", help="promote the host paused INCONCLUSIVE (recorded as your "
        "decision)")] = False,
    rerun: Annotated[bool, typer.Option(
        "--rerun", help="judge the paused or stopped host again with a new revalidation")]
    = False,
    db: DbOpt = DEFAULT_DB,
    state_dir: StateDirOpt = DEFAULT_STATE,
    report: ReportOpt = Path("vgpu-campaign.html"),
) -> None:
    """Go on after a pause: a manual upgrade done (`continue` alone), or a host whose
    verdict was INCONCLUSIVE promoted (--accept) or judged again (--rerun; also after a
    stop, once its cause is fixed). Who decided is recorded."""
    from vgpu.campaign import state as saved

    campaign = _load(file)
    state = _saved(campaign, state_dir)
    if state is None or state.status not in (saved.PAUSED, saved.STOPPED):
        raise InputError.single("command line", "continue", f"campaign {campaign.name} is "
                                f"not paused ({state.status if state else 'not started'})",
                                fix=f"`vgpu campaign run {file}` (--resume after a kill)")
    host = next(h for h in state.hosts if h.current is not None)
    phase = host.current
    if accept and rerun:
        raise InputError.single("command line", "--accept", "--accept and --rerun both given",
                                fix="choose one")
    if rerun:
        for name in ("revalidate", "gate"):
            host.phases[name] = saved.PhaseRecord()
        host.verdict, host.decided_by, host.left_in = None, None, None
        if host.phase("revalidate").started_at is not None:
            host.reruns += 1  # a new revalidation; an unrun one keeps its name
        state.note(f"rerun {host.host} by {_who()}")
    elif phase == "upgrade" and state.status == saved.PAUSED:
        state.end(host, "upgrade", f"upgraded by hand, confirmed by {_who()}")
        state.note(f"{host.host} upgrade confirmed by {_who()}")
    elif phase == "gate" and accept and state.status == saved.PAUSED:
        host.decided_by = f"{_who()}: accepted INCONCLUSIVE"
        state.note(f"{host.host} promoted INCONCLUSIVE by {_who()}")
    else:
        raise InputError.single("command line", "--accept/--rerun",
                                f"campaign {campaign.name} stands at {host.host} {phase}: "
                                f"{state.reason}", fix="--accept promotes an INCONCLUSIVE "
                                "host, --rerun judges it again; a manual upgrade is "
                                "confirmed by `continue` alone")
    state.save()
    _run(campaign, file, inventory, db, state_dir, state, report)


@campaign_app.command("abort")
def abort_command(file: CampaignFile, state_dir: StateDirOpt = DEFAULT_STATE) -> None:
    """End the campaign where it stands (recorded as your decision); the hosts stay as
    they are, each said."""
    from vgpu.campaign import state as saved

    campaign = _load(file)
    state = _saved(campaign, state_dir)
    if state is None:
        raise InputError.single("command line", "abort", f"no campaign {campaign.name} in "
                                f"{state_dir}", fix="nothing to abort")
    state.status, state.reason = saved.STOPPED, f"aborted by {_who()}"
    state.note(state.reason)
    state.save()
    _show(state)


@campaign_app.command("status")
def status_command(file: CampaignFile, state_dir: StateDirOpt = DEFAULT_STATE) -> None:
    """Every host's phase, verdict and time so far."""
    campaign = _load(file)
    state = _saved(campaign, state_dir)
    if state is None:
        _say(f"campaign {campaign.name}: not started (no state in {state_dir})")
        return
    _show(state)


def _show(state: CampaignState) -> None:
    from rich.table import Table

    from vgpu.campaign.state import PHASES

    table = Table(title=f"campaign {state.name}: {state.status}", title_justify="left")
    for column in ("host", "phase", "verdict", "decided by", *PHASES):
        table.add_column(column)
    for h in state.hosts:
        cells = []
        for name in PHASES:
            record = h.phase(name)
            took = f" {record.seconds:.0f}s" if record.seconds is not None else ""
            cells.append(f"{record.status}{took}")
        table.add_row(h.host, h.current or "through", h.verdict or "-", h.decided_by or "-",
                      *cells)
    common.console.print(table)
    if state.reason:
        _say(f"{state.status}: {state.reason}")


def _finish(state: CampaignState, report: Path | None) -> None:
    from vgpu.campaign import report as campaign_report

    if report is not None:
        campaign_report.write(state, report, report.with_suffix(".json"))
        _say(f"report: {report} (JSON: {report.with_suffix('.json')})")
    _show(state)
    raise typer.Exit(state.exit_code or 0)


def _run(campaign: Campaign, file: Path, inventory: Path | None, db: str, state_dir: Path,
         state: CampaignState, report: Path | None) -> None:
    from vgpu.bench.job import BenchRequest
    from vgpu.bench.workload import BenchOverrides
    from vgpu.campaign.runner import CampaignContext, run_campaign
    from vgpu.cli.revalidate import converger
    from vgpu.revalidate.render import render_outcome
    from vgpu.targets.runtime import RuntimeOptions
    from vgpu.vsphere.apply.lease import LabLease
    from vgpu.vsphere.connect import audit
    from vgpu.vsphere.connect.connection import connect, resolve_placement
    from vgpu.vsphere.connect.from_inventory import placement_from_inventory, target_from_inventory
    from vgpu.vsphere.connect.marks import host_marker

    site = common.site_of(campaign.inventory_path() or inventory)
    loaded, path = site.require("a campaign needs an inventory",
                                fix="name it in the campaign file (inventory:) or pass "
                                    "--inventory")
    known = {h.name for h in loaded.hosts}
    unknown = [h for h in campaign.hosts if h not in known]
    if unknown:
        raise InputError.single(str(file), "hosts", f"host(s) {', '.join(unknown)} are not "
                                f"in the inventory {path}", fix="list the inventory's hosts: "
                                + ", ".join(sorted(known)))
    lab = site.lab
    bench = BenchRequest(site, campaign.runs, campaign.workloads or None,
                         BenchOverrides(duration_s=campaign.duration_s),
                         allow_cpu=lab is not None,
                         runtime=RuntimeOptions(runtime=lab.guest_runtime()
                                                if lab is not None else None))
    names = placement_from_inventory(loaded, path)
    audit.set_campaign(campaign.name)
    try:
        with connect(target_from_inventory(loaded, path)) as session:
            placement = resolve_placement(session, names)
            with LabLease(session, placement.folder, names.lab, f"campaign {campaign.name}",
                          warn=lambda t: _say(f"warning: {t}"), over_job=True):
                ctx = CampaignContext(
                    campaign=campaign, inventory=loaded, inventory_path=path, bench=bench,
                    converge=converger(site, True, common.console), db=db,
                    dirs=_dirs(state_dir), say=_say, console=common.console,
                    mark=host_marker(session, placement.hosts, lambda t: _say(
                        f"warning: {t}")),
                    show=lambda outcome: render_outcome(outcome, common.console))
                state = run_campaign(ctx, state)
    except KeyboardInterrupt:
        _say(f"interrupted: `vgpu campaign run {file} --resume` continues where it stopped")
        raise typer.Exit(130) from None
    _finish(state, report)


run_command.__doc__ = f"{run_command.__doc__} {EXIT_HELP}"
continue_command.__doc__ = f"{continue_command.__doc__} {EXIT_HELP}"

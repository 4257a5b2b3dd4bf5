"""`vgpu revalidate`: the after-upgrade job in one command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from vgpu import catalog
from vgpu.cli import common
from vgpu.cli.options import DbOpt, HostOpt, InventoryReq, JsonOpt, RunsOpt
from vgpu.cli.root import app
from vgpu.defaults import (
    DEFAULT_BASELINE,
    DEFAULT_CAPTURE_PAUSE_S,
    DEFAULT_CAPTURE_SERIES,
    DEFAULT_DB,
)
from vgpu.errors import InputError, Problem

if TYPE_CHECKING:
    from collections.abc import Callable

    from vgpu.container.images import HeldImage
    from vgpu.model.inventory import Inventory
    from vgpu.model.scenario import Scenario
    from vgpu.results.store.result_store import ResultStore
    from vgpu.revalidate.capture import CapturePlan
    from vgpu.revalidate.flow import Converge
    from vgpu.revalidate.hosts import BaselineChoice
    from vgpu.site import Site

DEFAULT_FACTS = Path("vgpu-results/preflight")
DEFAULT_STATE = Path("vgpu-results/revalidate")


@app.command("revalidate")
def revalidate_command(
    inventory: InventoryReq = None,
    scenario: Annotated[list[str] | None, typer.Option(
        "--scenario", "-s", help="scenario id to revalidate (repeatable; default: the "
        "scenarios of the baseline)")] = None,
    baseline: Annotated[str, typer.Option(
        "--baseline", help="the named pre-upgrade baseline to judge against")] =
        DEFAULT_BASELINE,
    references: Annotated[Path | None, typer.Option(
        "--references", help="references from `vgpu baseline calibrate`, used for the "
        "workloads the baseline does not hold (a lab with no baseline of its own)")] = None,
    capture_baseline: Annotated[bool, typer.Option(
        "--capture-baseline", help="record this run's series as the baseline (before an "
        "upgrade); refused where the baseline holds the scenario already, unless "
        "--replace")] = False,
    replace: Annotated[bool, typer.Option(
        "--replace", help="with --capture-baseline: overwrite the scenarios' existing "
        "baseline")] = False,
    baseline_series: Annotated[int, typer.Option(
        "--baseline-series", min=1, help="with --capture-baseline: series per scenario, "
        "spaced in time; their spread is stored with the baseline and judges later series "
        "against it (1: no spread of its own)")] = DEFAULT_CAPTURE_SERIES,
    baseline_pause: Annotated[float, typer.Option(
        "--baseline-pause", min=0.0, help="with --capture-baseline: seconds between its "
        "series")] = DEFAULT_CAPTURE_PAUSE_S,
    host: HostOpt = None,
    other_host: Annotated[str | None, typer.Option(
        "--other-host", help="with --host: judge against the baseline captured on this "
        "other host (the host is then shown as a platform difference); without it a "
        "comparison across hosts is refused")] = None,
    resume: Annotated[bool, typer.Option(
        "--resume", help="continue the last unfinished revalidation of this inventory, "
        "without redoing its finished scenarios")] = False,
    converge: Annotated[bool, typer.Option(
        "--converge/--no-converge", help="apply and provision each scenario before its "
        "bench (idempotent: only what differs is changed)")] = True,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="apply without asking")] = False,
    workload: Annotated[list[str] | None, typer.Option(
        "--workload", "-w", help="only this workload of each scenario (repeatable)")] = None,
    runs: RunsOpt = None,
    duration: Annotated[float | None, typer.Option(
        "--duration", min=0.001, help="LoadGen min duration per run in seconds")] = None,
    allow_cpu: Annotated[bool, typer.Option(
        "--allow-cpu", help="run instances whose GPU the harness cannot use on the CPU "
        "(a functional check)")] = False,
    db: DbOpt = DEFAULT_DB,
    report: Annotated[Path | None, typer.Option("--report", help="HTML report")] =
        Path("vgpu-revalidate.html"),
    no_report: Annotated[bool, typer.Option("--no-report", help="write no report")] = False,
    junit: Annotated[Path | None, typer.Option("--junit", help="JUnit XML of the "
                                               "verdicts")] = None,
    facts_dir: Annotated[Path, typer.Option(help="where preflight facts are saved")] =
        DEFAULT_FACTS,
    state_dir: Annotated[Path, typer.Option(help="where progress is saved for "
                                            "--resume")] = DEFAULT_STATE,
    rebuild_image: Annotated[bool, typer.Option(
        "--rebuild-image", help="make the harness image anew for the guest driver (as `vgpu "
        "provision` does) instead of running the baseline's image by its ID; the verdicts "
        "then name what else changed with it (CUDA, ONNX Runtime, ...)")] = False,
    as_json_flag: JsonOpt = False,
) -> None:
    """Preflight with drift since the baseline's facts -> apply -> provision -> bench
    (with the bare-metal twin) -> verdicts against bare metal and the pre-upgrade
    baseline. With --host, every VM runs on that host and is judged against that host's
    own baseline (found by name, else by the host's hardware UUID), never against bare
    metal alone. Exit 0 PASS, 3 FAIL, 4 INCONCLUSIVE, 5 nothing to judge against (no
    baseline of the host: nothing is run), 1 a scenario could not run, 2 bad input (a
    baseline that would be overwritten, --resume of another host's run)."""
    from vgpu.bench.job import BenchRequest
    from vgpu.bench.workload import BenchOverrides
    from vgpu.model.yamlsource import load_yaml
    from vgpu.results.export.junit import write_junit
    from vgpu.results.store.result_store import ResultStore
    from vgpu.results.verdict.calibration import parse_references
    from vgpu.results.views.report import build_report, write_report
    from vgpu.revalidate.capture import CapturePlan
    from vgpu.revalidate.flow import RevalidateRequest, revalidate
    from vgpu.revalidate.image import ImageCannotRun
    from vgpu.revalidate.render import as_json, render_outcome
    from vgpu.revalidate.state import RESUMED
    from vgpu.targets.runtime import RuntimeOptions

    assert inventory is not None  # InventoryReq finds one or stops with exit 2
    site = common.site_of(inventory)
    loaded, path = site.require("revalidation needs an inventory", fix="pass --inventory")
    # Input errors before anything runs.
    choice, scenarios = _baseline_and_scenarios(
        db, baseline, host, other_host, capture_baseline, replace, scenario,
        lambda: _host_uuid(loaded, path, host))
    if references is not None:
        parse_references(load_yaml(references).data, str(references))
    out = Console(stderr=True) if as_json_flag else common.console
    lab = site.lab
    if lab is not None:
        out.print(f"note: {lab.runtime_note()}; the guests have no GPU, so each run is "
                  "a functional check on the CPU", highlight=False)
    with ResultStore.open(db) as store:
        capture = CapturePlan(baseline_series, baseline_pause)
        _say_baseline(store, choice, capture if capture_baseline else None, out)
        request = RevalidateRequest(
            inventory=loaded, inventory_path=path, scenarios=scenarios,
            bench=BenchRequest(site, runs, workload, BenchOverrides(duration_s=duration),
                               allow_cpu or lab is not None,
                               RuntimeOptions(runtime=lab.guest_runtime()
                                              if lab is not None else None)),
            facts_dir=facts_dir, state_dir=state_dir, baseline=baseline,
            capture_baseline=capture_baseline, resume=resume, references=references,
            choice=choice, rebuild_image=rebuild_image, capture=capture)
        try:
            with common.flag_names({RESUMED: "--resume"}, {}):
                outcome = revalidate(request, store, out,
                                     converge=converger(site, yes, out) if converge
                                     else _leave_as_is)
        except ImageCannotRun as exc:
            raise InputError([*exc.problems, Problem(
                "command line", "--rebuild-image", "without it each scenario runs the harness "
                "image its baseline ran", fix="pass --rebuild-image to build the image for "
                "the new guest driver")]) from None
        if report is not None and not no_report:
            write_report(build_report(store, outcome.comparisons,
                                      title="vgpu revalidation"), report)
    if junit is not None:
        write_junit(outcome.comparisons, junit)
    if as_json_flag:
        typer.echo(json.dumps(as_json(outcome), indent=2))
    else:
        render_outcome(outcome, common.console)
    raise typer.Exit(outcome.exit_code)


def _host_uuid(inventory: Inventory, path: Path, host: str | None) -> str | None:
    from vgpu.vsphere.connect.hostid import host_uuid

    return host_uuid(inventory, path, host) if host else None


def _baseline_and_scenarios(db: str, baseline: str, host: str | None,
                            other_host: str | None, capture: bool, replace: bool,
                            ids: list[str] | None, uuid_of: Callable[[], str | None],
                            ) -> tuple[BaselineChoice, list[Scenario]]:
    """The baseline sets and the scenarios (default: the judged set's)."""
    from vgpu.results.store.result_store import ResultStore, store_exists
    from vgpu.revalidate.hosts import choose_baseline, scenarios_in_set, set_name

    if not store_exists(db):
        choice = choose_baseline(None, baseline, host, other_host, capture, replace,
                                 [catalog.load(i).id for i in ids or []])
    else:
        with ResultStore.open_existing(db) as store:
            if not ids:
                ids = scenarios_in_set(store, set_name(baseline, other_host or host))
            choice = choose_baseline(store, baseline, host, other_host, capture, replace,
                                     [catalog.load(i).id for i in ids or []], uuid_of)
    if not ids:
        raise InputError.single("command line", "--scenario",
                                f"no scenario given and no baseline '{choice.judged}' in {db} "
                                "names any", fix="pass --scenario ID (repeatable)")
    return choice, [catalog.load(i) for i in dict.fromkeys(ids)]


def _say_baseline(store: ResultStore, choice: BaselineChoice, capture: CapturePlan | None,
                  out: Console) -> None:
    from vgpu.revalidate.hosts import scenarios_in_set

    name = choice.recorded if capture else choice.judged
    stored = scenarios_in_set(store, name)
    if capture:
        out.print(f"this run's series will be recorded as baseline '{name}': "
                  f"{capture.describe()}", highlight=False)
    elif choice.across_hosts:
        out.print(f"[yellow]judged against host {choice.other_host}'s baseline '{name}':[/] "
                  f"the host is a difference, not the same measurement")
    elif not stored:
        out.print(
            f"[yellow]no baseline '{name}' stored in {store.path}:[/] verdicts are against "
            "bare metal only; run with --capture-baseline before an upgrade to record one")


def _leave_as_is(scenario: Scenario, host: str | None, image: HeldImage | None) -> None:
    """--no-converge: the lab is benched as it is."""


def converger(site: Site, yes: bool, console: Console) -> Converge:
    """`vgpu apply` (only what differs from the plan changes in vCenter) then `vgpu
    provision` (each guest step checks before it changes anything). Bare-metal scenarios
    are left as they are: their MIG layout is made once per host with `vgpu apply`, which
    needs the host's GPU."""

    def converge(sc: Scenario, host: str | None, image: HeldImage | None) -> None:
        from vgpu.cli.provision import provision_scenario
        from vgpu.vsphere import commands
        from vgpu.vsphere.desired.limits import DEFAULT_CONCURRENCY, DEFAULT_IP_TIMEOUT_S

        if sc.platform != "vsphere":
            return
        inventory, inventory_path = site.require("converging needs an inventory",
                                                 fix="pass --inventory")
        commands.apply(sc, inventory, inventory_path, dry_run=False,
                       confirm=common.terminal_confirm(yes),
                       concurrency=DEFAULT_CONCURRENCY, ip_timeout_s=DEFAULT_IP_TIMEOUT_S,
                       console=console, host=host)
        if site.lab is not None:
            for guest in site.lab.start_for_apply(site.plan(sc, pin_host=host)):
                console.print(f"simulator guest {guest.vm} at {guest.address} "
                              f"({guest.hardware}, simulated)", highlight=False)
        provision_scenario(sc, site, held_image=image)

    return converge

"""Benchmark and results commands: bench, results, baseline, compare, report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from vgpu import catalog
from vgpu.bench import devices
from vgpu.bench.local import local_targets
from vgpu.bench.progress import RichListener
from vgpu.bench.session import BenchOutcome, run_bench
from vgpu.bench.summary import as_json, render
from vgpu.bench.targets import Target
from vgpu.bench.workload import BenchOverrides
from vgpu.cli import app, common
from vgpu.cli.common import scenario_from_args
from vgpu.errors import InputError, RemoteError, VerdictFailed
from vgpu.model.load import load_inventory
from vgpu.model.scenario import InferenceWorkload, Scenario
from vgpu.model.yamlsource import load_yaml
from vgpu.results.compare import Comparison, Reference
from vgpu.results.export import export_csv, export_json
from vgpu.results.judge import compare_series, compare_with_references, default_kind
from vgpu.results.junit import write_junit
from vgpu.results.report import build_report, write_report
from vgpu.results.series import load_series, series_of_run
from vgpu.results.store import DEFAULT_DB, ResultStore

DbOpt = Annotated[Path, typer.Option("--db", help="results database (SQLite file)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="machine-readable output on stdout")]
DEFAULT_REPORT = Path("vgpu-report.html")
_STYLE = {"PASS": "bold green", "FAIL": "bold red", "INCONCLUSIVE": "bold yellow"}

baseline_app = typer.Typer(help="Name runs as baselines for later comparisons.",
                           no_args_is_help=True)
app.add_typer(baseline_app, name="baseline")


def _positive(value: float | None, flag: str) -> None:
    if value is not None and value <= 0:
        raise InputError.single("command line", flag, f"must be > 0, got {value}",
                                fix=f"give {flag} a positive number")


@app.command()
def bench(
    file: Annotated[Path | None, typer.Argument(help="scenario YAML file",
                                                show_default=False)] = None,
    scenario: Annotated[str | None, typer.Option("--scenario", "-s",
                                                 help="catalogue scenario id, e.g. 6")] = None,
    inventory: Annotated[Path | None, typer.Option(
        "--inventory", "-i", help="run on the scenario's VMs / bare-metal hosts of this "
        "inventory (default: this machine)")] = None,
    runs: Annotated[int | None, typer.Option("--runs", help="repeats (default: the "
                                             "scenario's, usually 3)")] = None,
    duration: Annotated[float | None, typer.Option(
        "--duration", help="LoadGen min duration per run in seconds (default: the "
        "workload's; on a CPU its cpu_duration_s)")] = None,
    workload: Annotated[list[str] | None, typer.Option(
        "--workload", "-w", help="run only this workload (repeatable)")] = None,
    full_models: Annotated[bool, typer.Option(
        "--full-models", help="on a CPU, keep the scenario's model sizes instead of the "
        "tiny variants")] = False,
    db: DbOpt = DEFAULT_DB,
    report: Annotated[Path | None, typer.Option("--report", help="HTML report to write")] =
    DEFAULT_REPORT,
    no_report: Annotated[bool, typer.Option("--no-report", help="write no report")] = False,
    as_json_flag: JsonOpt = False,
    allow_cpu: Annotated[bool, typer.Option(
        "--allow-cpu", help="with --inventory: run instances whose planned GPU the harness "
        "cannot use on the CPU instead of failing them (a functional check, recorded as "
        "such)")] = False,
    with_baseline: Annotated[bool, typer.Option(
        "--with-baseline", help="first run the scenario's baseline scenario (e.g. bm6 for 6) "
        "on the same targets and settings, so this run ends in a verdict")] = False,
) -> None:
    """Run a scenario's inference workloads on every target at once (synchronised start),
    repeated; store the runs, print statistics and the verdict against the baseline."""
    sc = scenario_from_args(file, scenario)
    if runs is not None and runs < 1:
        raise InputError.single("command line", "--runs", f"must be >= 1, got {runs}",
                                fix="give --runs 1 or more")
    _positive(duration, "--duration")
    if not any(isinstance(w, InferenceWorkload) for w in sc.workloads):
        # A training scenario (e.g. train_multinode_4): torchrun on every node.
        from vgpu.train.cli import run_command

        if with_baseline or workload or duration is not None:
            raise InputError.single("command line", "--with-baseline/--workload/--duration",
                                    f"scenario {sc.id} has only training workloads; these "
                                    "options apply to inference", fix="leave them out")
        run_command(file=file, scenario=scenario, runs=runs, inventory=inventory,
                    full_models=full_models, db=db)
        return
    known = [w.label for w in sc.workloads]
    for name in workload or []:
        if name not in known:
            raise InputError.single(sc.source or "scenario", "--workload",
                                    f"no workload named '{name}'",
                                    fix=f"use one of: {', '.join(known)}")
    out = Console(stderr=True) if as_json_flag else common.console
    overrides = BenchOverrides(duration_s=duration, full_models=full_models)
    base = _baseline_scenario(sc) if with_baseline else None
    with ResultStore.open(db) as store:
        if base is not None:
            out.print(f"[bold]Baseline first:[/] scenario {base.id} ({base.name})")
            base_outcome = _run_scenario(base, inventory, store, runs, overrides, workload,
                                         allow_cpu)
            if not as_json_flag:
                render(base_outcome, out, str(db), None)
            if base_outcome.failure:
                raise RemoteError(f"baseline scenario {base.id}: {base_outcome.failure}")
        outcome = _run_scenario(sc, inventory, store, runs, overrides, workload, allow_cpu)
        report_path = None if no_report or report is None else report
        if report_path is not None:
            write_report(build_report(store, outcome.comparisons), report_path)
    if as_json_flag:
        typer.echo(json.dumps(as_json(outcome, str(db), _text(report_path)), indent=2))
    else:
        render(outcome, out, str(db), _text(report_path))
    if outcome.failure:
        raise RemoteError(outcome.failure)
    if any(c.verdict == "FAIL" for c in outcome.comparisons):
        raise VerdictFailed("verdict FAIL against the baseline")


def _baseline_scenario(sc: Scenario) -> Scenario:
    if sc.baseline is None or sc.baseline.scenario is None:
        raise InputError.single(sc.source or f"scenario {sc.id}", "baseline.scenario",
                                "--with-baseline needs a baseline scenario",
                                fix="set baseline: {scenario: ID} in the scenario file")
    try:
        return catalog.load(sc.baseline.scenario)
    except InputError as exc:
        if not any(p.file == "--scenario" for p in exc.problems):
            raise  # the baseline file itself is broken: its own problems name it
        raise InputError.single(sc.source or f"scenario {sc.id}", "baseline.scenario",
                                f"no scenario with id '{sc.baseline.scenario}'",
                                fix=exc.problems[0].fix) from None


def _run_scenario(sc: Scenario, inventory: Path | None, store: ResultStore,
                  runs: int | None, overrides: BenchOverrides,
                  workload: list[str] | None, allow_cpu: bool) -> BenchOutcome:
    if inventory is not None:
        targets, notes = _inventory_targets(sc, inventory, store.logs_root / "ssh", allow_cpu)
    else:
        targets, notes = local_targets(sc, devices.discover(), store.logs_root / "work")
    try:
        return run_bench(sc, targets, notes, store, runs=runs, overrides=overrides,
                         workload_names=workload, listener=RichListener(Console(stderr=True)))
    finally:
        for transport in {id(t.transport): t.transport for t in targets}.values():
            transport.close()


def _inventory_targets(
    scenario: Scenario, inventory: Path, log_root: Path, allow_cpu: bool
) -> tuple[list[Target], list[str]]:
    from vgpu.bench.remote import bare_metal_placements, build_targets, vsphere_placements

    path = catalog.resolve_inventory(inventory)
    loaded = load_inventory(path)
    if scenario.platform == "bare-metal" and loaded.is_local:
        # This machine only: its devices come from NVML (or the GPU simulator), as without
        # an inventory, so MIG devices `vgpu apply` created are found by their owner.
        return local_targets(scenario, devices.discover(), log_root)
    if scenario.platform == "vsphere":
        placements = vsphere_placements(scenario, loaded, path)
    else:
        placements = bare_metal_placements(scenario, loaded, path)
    return build_targets(placements, log_root, allow_cpu=allow_cpu)


def _text(path: Path | None) -> str | None:
    return None if path is None else str(path)


@app.command()
def results(
    db: DbOpt = DEFAULT_DB,
    scenario: Annotated[str | None, typer.Option("--scenario", "-s")] = None,
    status: Annotated[str | None, typer.Option("--status", help="running|ok|failed|aborted")]
    = None,
    export: Annotated[str | None, typer.Option("--export", help="csv or json")] = None,
) -> None:
    """List stored runs, or export them (--export csv|json) to stdout."""
    if export not in (None, "csv", "json"):
        raise InputError.single("command line", "--export", f"'{export}' is not a format",
                                fix="use --export csv or --export json")
    with ResultStore.open_existing(db) as store:
        runs = store.runs(scenario_id=scenario, status=status)
        if export == "csv":
            typer.echo(export_csv(store, runs), nl=False)
            return
        if export == "json":
            typer.echo(export_json(store, runs))
            return
        table = Table(title=f"runs in {db}")
        for column in ("run", "series", "scenario", "workload", "target", "status", "repeat",
                       "instances", "system samples/s", "skew ms", "reason"):
            table.add_column(column)
        for run in runs:
            stored = store.instances(run.id)
            total = sum(i.result.throughput or 0.0 for i in stored)
            table.add_row(
                str(run.id), run.series_id[:8], escape(run.scenario_id), escape(run.workload),
                run.target_kind, run.status, str(run.repeat_index), str(len(stored)),
                f"{total:.5g}" if stored else "-",
                "-" if run.sync_skew_s is None else f"{run.sync_skew_s * 1e3:.1f}",
                escape(run.reason or ""),
            )
        common.console.print(table)


@baseline_app.command("set")
def baseline_set(
    run_id: Annotated[int, typer.Argument(help="a run of the series to use as baseline")],
    name: Annotated[str | None, typer.Option("--name", help="baseline name (default: "
                                             "'<scenario id>:<workload>')")] = None,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Name the series of RUN_ID (all its ok repeats) as a baseline."""
    with ResultStore.open_existing(db) as store:
        chosen = store.set_baseline(run_id, name)
        runs = store.runs(series_id=chosen.series_id, status="ok")
    common.console.print(f"baseline '{chosen.name}' = series {chosen.series_id[:8]} "
                  f"({len(runs)} ok run(s): {', '.join(str(r.id) for r in runs)})")


@baseline_app.command("list")
def baseline_list(db: DbOpt = DEFAULT_DB) -> None:
    """List named baselines."""
    with ResultStore.open_existing(db) as store:
        for item in store.baselines():
            common.console.print(f"{item.name}: run {item.run_id}, series {item.series_id[:8]}")


def _references(path: Path) -> dict[str, Reference]:
    data = load_yaml(path).data
    if not isinstance(data, dict):
        raise InputError.single(str(path), "(top level)", "must map metric names to "
                                "references", fix="write metric: {value: ..., lower: -0.02}")
    refs = {}
    for metric, body in data.items():
        if not isinstance(body, dict) or not isinstance(body.get("value"), int | float):
            raise InputError.single(str(path), f"{metric}.value", "a number is required",
                                    fix="give value: <number>, optional lower/upper/unit")
        unknown = set(body) - {"value", "lower", "upper", "unit"}
        if unknown:
            raise InputError.single(str(path), f"{metric}.{sorted(unknown)[0]}",
                                    "unknown key", fix="use value, lower, upper, unit")
        refs[str(metric)] = Reference(value=float(body["value"]), lower=body.get("lower"),
                                      upper=body.get("upper"), unit=str(body.get("unit", "")))
    return refs


def _print_comparison(comparison: Comparison) -> None:
    table = Table(title=escape(comparison.title), title_justify="left")
    for column in ("metric", "candidate mean", "reference mean", "ratio", "difference",
                   "95% CI", "MDD", "allowed", "verdict"):
        table.add_column(column)
    for c in comparison.checks:
        ci = "-" if c.ci_pct is None else f"[{c.ci_pct[0]:+.2f}%, {c.ci_pct[1]:+.2f}%]"
        table.add_row(
            c.metric, f"{c.candidate.mean:.5g} {c.unit}", f"{c.reference_mean:.5g}",
            f"{c.ratio:.4f}", f"{c.difference_pct:+.2f}%", ci,
            "-" if c.mdd_pct is None else f"{c.mdd_pct:.2f}%", c.band.describe(),
            f"[{_STYLE[c.verdict]}]{c.verdict}[/]",
        )
    common.console.print(table)
    common.console.print(f"candidate: {escape(comparison.candidate)}\n"
                         f"reference: {escape(comparison.reference)}")
    common.console.print(f"verdict: [{_STYLE[comparison.verdict]}]{comparison.verdict}[/]")


@app.command()
def compare(
    candidate: Annotated[int, typer.Argument(help="a run of the candidate series")],
    reference: Annotated[int | None, typer.Argument(help="a run of the reference series")]
    = None,
    baseline: Annotated[str | None, typer.Option("--baseline", help="named baseline as "
                                                 "reference")] = None,
    references: Annotated[Path | None, typer.Option(
        "--references", help="YAML/JSON: metric -> {value, lower, upper, unit}")] = None,
    kind: Annotated[str | None, typer.Option(
        "--kind", help="vm-vs-bare-metal | scenario-vs-scenario | run-vs-baseline "
        "(default: from the two series)")] = None,
    tolerance: Annotated[float, typer.Option("--tolerance", min=0.0,
                                             help="allowed loss, percent (>= 0)")] = 2.0,
    min_gain: Annotated[float | None, typer.Option(
        "--min-gain", help="scenario-vs-scenario: required throughput gain, percent")] = None,
    junit: Annotated[Path | None, typer.Option("--junit", help="write JUnit XML here")] = None,
    db: DbOpt = DEFAULT_DB,
    as_json_flag: JsonOpt = False,
) -> None:
    """Judge a run's series against another series, a named baseline or reference values.
    Exit code 3 when the verdict is FAIL."""
    given = [x for x in (reference, baseline, references) if x is not None]
    if len(given) != 1:
        raise InputError.single("command line", "REFERENCE / --baseline / --references",
                                f"{len(given)} references given",
                                fix="give exactly one of them")
    kinds = ("vm-vs-bare-metal", "scenario-vs-scenario", "run-vs-baseline")
    if kind is not None and kind not in kinds:
        raise InputError.single("command line", "--kind", f"'{kind}' is not a kind",
                                fix=f"use one of: {', '.join(kinds)}")
    with ResultStore.open_existing(db) as store:
        cand = load_series(store, series_of_run(store, candidate))
        if references is not None:
            try:
                comparison = compare_with_references(cand, _references(references),
                                                     str(references))
            except KeyError as exc:
                raise InputError.single(str(references), "(metric)", str(exc.args[0]),
                                        fix="use metric names the candidate has") from None
        else:
            if baseline is not None:
                named = store.baseline(baseline)
                if named is None:
                    raise InputError.single(str(db), "--baseline",
                                            f"no baseline named '{baseline}'",
                                            fix="see `vgpu baseline list`")
                ref = load_series(store, named.series_id)
            else:
                assert reference is not None
                ref = load_series(store, series_of_run(store, reference))
            chosen: Any = kind or ("run-vs-baseline" if baseline else default_kind(cand, ref))
            comparison = compare_series(
                chosen, cand, ref, tolerance=tolerance / 100.0,
                min_gain=None if min_gain is None else min_gain / 100.0,
            )
    if junit is not None:
        write_junit([comparison], junit)
    if as_json_flag:
        typer.echo(json.dumps(comparison.as_dict(), indent=2))
    else:
        _print_comparison(comparison)
    if comparison.verdict == "FAIL":
        raise VerdictFailed(f"{comparison.title}: FAIL")


@app.command()
def report(
    db: DbOpt = DEFAULT_DB,
    out: Annotated[Path | None, typer.Option("--out", help="HTML file")] = DEFAULT_REPORT,
    markdown: Annotated[Path | None, typer.Option("--markdown", help="Markdown file")] = None,
    png_dir: Annotated[Path | None, typer.Option("--png-dir", help="write the charts "
                                                 "as PNG files here")] = None,
    tolerance: Annotated[float, typer.Option("--tolerance", min=0.0, help="percent, for "
                                             "the VM vs bare-metal verdicts (>= 0)")] = 2.0,
) -> None:
    """Write the results report: self-contained HTML, optional Markdown and PNGs."""
    with ResultStore.open_existing(db) as store:
        built = build_report(store, tolerance=tolerance / 100.0)
    if markdown is not None and png_dir is None:
        png_dir = markdown.parent / f"{markdown.stem}-png"
    written = write_report(built, out, markdown, png_dir)
    for path in written:
        common.console.print(f"wrote {path}")

"""``vgpu compare`` (a run's series judged against another series, a named baseline or
reference values) and the ``vgpu baseline`` commands that name and calibrate references."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from vgpu.cli import common
from vgpu.cli.checks import check_compare_inputs
from vgpu.cli.options import DbOpt, InventoryReq, JsonOpt
from vgpu.cli.root import app
from vgpu.defaults import DEFAULT_DB
from vgpu.errors import InputError
from vgpu.exitcodes import exit_for

if TYPE_CHECKING:
    from vgpu.results.stats.noise import NoiseLevels
    from vgpu.results.store.result_store import ResultStore
    from vgpu.results.store.series import SeriesData
    from vgpu.results.verdict.compare import Comparison, Reference

_STYLE = {"PASS": "bold green", "FAIL": "bold red", "INCONCLUSIVE": "bold yellow"}

baseline_app = typer.Typer(help="Name runs as baselines for later comparisons.",
                           no_args_is_help=True)
app.add_typer(baseline_app, name="baseline")


@baseline_app.command("set")
def baseline_set(
    run_id: Annotated[int, typer.Argument(help="a run of the series to use as baseline")],
    name: Annotated[str | None, typer.Option("--name", help="baseline name (default: "
                                             "'<scenario id>:<workload>')")] = None,
    in_set: Annotated[str | None, typer.Option(
        "--set", help="put it in this named set, as `vgpu revalidate --baseline SET` reads "
        "it (e.g. pre-upgrade): stored as '<set>:<scenario id>:<workload>'")] = None,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Name the series of RUN_ID (all its ok repeats) as a baseline."""
    from vgpu.results.store.result_store import ResultStore
    from vgpu.revalidate.flow import baseline_key

    if name is not None and in_set is not None:
        raise InputError.single("command line", "--name/--set", "give one of the two",
                                fix="--set for `vgpu revalidate`, --name for `vgpu compare`")
    with ResultStore.open_existing(db) as store:
        if in_set is not None:
            run = store.run(run_id)
            if run is not None:
                name = baseline_key(in_set, run.scenario_id, run.identity.name)
        chosen = store.set_baseline(run_id, name)
        runs = store.runs(series_id=chosen.series_id, status="ok")
    common.console.print(f"baseline '{chosen.name}' = series {chosen.series_id[:8]} "
                  f"({len(runs)} ok run(s): {', '.join(str(r.id) for r in runs)})")


@baseline_app.command("calibrate")
def baseline_calibrate(
    out: Annotated[Path, typer.Argument(help="reference file to write (YAML)")],
    scenario: Annotated[list[str] | None, typer.Option(
        "--scenario", "-s", help="only runs of this scenario (repeatable)")] = None,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Turn stored golden runs into references per host class (target kind, GPU model,
    profile, workload, runtime): mean, spread and n, shareable between labs and used by
    `vgpu compare RUN --references FILE`."""
    from vgpu.results.store.result_store import ResultStore
    from vgpu.results.verdict.calibration import calibrate, write_references
    from vgpu.results.views.format import number

    with ResultStore.open_existing(db) as store:
        references = calibrate(store, scenario)
    if not references:
        raise InputError.single(str(db), "runs", "no ok inference series with 2 or more "
                                "repeats to calibrate from", fix="run `vgpu bench` first")
    write_references(references, out)
    for r in references:
        common.console.print(f"{r.target_kind} / {r.gpu} / {r.profile} / {r.workload} / "
                             f"{r.runtime}: {r.metric} {number(r.mean)} {r.unit} "
                             f"(sd {number(r.stdev)}, n={r.n}, {r.series} series)")
    common.console.print(f"wrote {len(references)} reference(s) to {out}")


@baseline_app.command("list")
def baseline_list(db: DbOpt = DEFAULT_DB) -> None:
    """List named baselines."""
    from vgpu.results.store.result_store import ResultStore

    with ResultStore.open_existing(db) as store:
        for item in store.baselines():
            common.console.print(f"{item.name}: run {item.run_id}, series {item.series_id[:8]}")


@baseline_app.command("remap")
def baseline_remap(
    name: Annotated[str, typer.Argument(help="the baseline set, e.g. pre-upgrade@esx07",
                                        show_default=False)],
    inventory: InventoryReq = None,
    host: Annotated[str | None, typer.Option(
        "--host", help="the host whose hardware UUID the set takes (default: the host it "
        "was captured on)")] = None,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Tie a baseline set to a host's hardware UUID as vCenter reports it now, on purpose:
    a host whose board was replaced (a new UUID, the same name) is otherwise refused as
    another machine. Says the UUIDs before and after."""
    from dataclasses import replace

    from vgpu.results.store.result_store import ResultStore
    from vgpu.vsphere.connect.hostid import host_uuid

    assert inventory is not None  # InventoryReq finds one or stops with exit 2
    loaded, path = common.site_of(inventory).require("remap needs an inventory",
                                                     fix="pass --inventory")
    with ResultStore.open_existing(db) as store:
        record = store.baseline_set(name)
        if record is None:
            names = ", ".join(s.name for s in store.baseline_sets()) or "none"
            raise InputError.single("command line", "NAME", f"no baseline set '{name}' in "
                                    f"{db}", fix=f"name one of: {names}")
        target = host or record.host
        if target is None:
            raise InputError.single("command line", "--host", f"baseline set '{name}' was "
                                    "captured on no pinned host", fix="pass --host HOST")
        uuid = host_uuid(loaded, path, target)
        if uuid is None:
            raise InputError.single("command line", "--host", f"vCenter has no host "
                                    f"{target} (or it reports no hardware UUID)",
                                    fix="name a host of the inventory's vCenter")
        store.put_baseline_set(replace(record, hardware_uuid=uuid))
    common.console.print(f"baseline set '{name}': hardware UUID {record.hardware_uuid or '-'}"
                         f" -> {uuid} (host {target}, as vCenter reports it now)",
                         highlight=False)


def _references(path: Path) -> dict[str, Reference]:
    from vgpu.model.yamlsource import load_yaml
    from vgpu.results.verdict.compare import Reference

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
    from rich.table import Table

    from vgpu.results.verdict.platforms import describe_changes
    from vgpu.results.views.format import number

    table = Table(title=escape(comparison.title), title_justify="left")
    for column in ("metric", "candidate mean", "reference mean", "ratio", "difference",
                   "95% CI", "MDD", "allowed", "verdict"):
        table.add_column(column)
    for c in comparison.checks:
        ci = "-" if c.ci_pct is None else f"[{c.ci_pct[0]:+.2f}%, {c.ci_pct[1]:+.2f}%]"
        table.add_row(
            c.metric, f"{number(c.candidate.mean)} {c.unit}", number(c.reference_mean),
            f"{c.ratio:.4f}", f"{c.difference_pct:+.2f}%", ci,
            "-" if c.mdd_pct is None else f"{c.mdd_pct:.2f}%", c.band.describe(),
            f"[{_STYLE[c.verdict]}]{c.verdict}[/]",
        )
    common.console.print(table)
    common.console.print(f"candidate: {escape(comparison.candidate)}\n"
                         f"reference: {escape(comparison.reference)}")
    common.console.print(f"verdict: [{_STYLE[comparison.verdict]}]{comparison.verdict}[/]")
    for line in comparison.why:
        common.console.print(f"  {escape(line)}")
    if comparison.platform_changes:
        common.console.print("platform differences (reference -> candidate):")
        for line in describe_changes(comparison.platform_changes):
            common.console.print(f"  {escape(line)}")


@app.command()
def compare(
    candidate: Annotated[int, typer.Argument(help="a run of the candidate series")],
    reference: Annotated[int | None, typer.Argument(help="a run of the reference series")]
    = None,
    baseline: Annotated[str | None, typer.Option("--baseline", help="named baseline as "
                                                 "reference")] = None,
    references: Annotated[Path | None, typer.Option(
        "--references", help="YAML/JSON: metric -> {value, lower, upper, unit}, or a "
        "file written by `vgpu baseline calibrate`")] = None,
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
    Exit 0 PASS, 3 FAIL, 4 INCONCLUSIVE, 1 could not run, 2 bad input."""
    from vgpu.results.store.result_store import ResultStore
    from vgpu.results.store.series import load_series, series_of_run
    from vgpu.results.verdict.judge import compare_series
    from vgpu.results.verdict.noise_store import levels_against, levels_for
    from vgpu.results.verdict.referee import kind_between

    check_compare_inputs(reference, baseline, references, kind)
    with ResultStore.open_existing(db) as store:
        cand = load_series(store, series_of_run(store, candidate))
        levels = levels_for(store, cand)
        if references is not None:
            comparison = _against_references(cand, references, tolerance / 100.0, levels)
        else:
            ref = _reference_series(store, db, reference, baseline)
            chosen: Any = kind or ("run-vs-baseline" if baseline
                                   else kind_between(store, cand, ref))
            comparison = compare_series(
                chosen, cand, ref, tolerance=tolerance / 100.0,
                min_gain=None if min_gain is None else min_gain / 100.0,
                levels=levels_against(store, cand, ref),
            )
    _emit_comparison(comparison, junit, as_json_flag)


def _against_references(cand: SeriesData, references: Path,
                        tolerance: float, levels: NoiseLevels) -> Comparison:
    from vgpu.model.yamlsource import load_yaml
    from vgpu.results.verdict.calibration import compare_calibrated, is_calibrated, parse_references
    from vgpu.results.verdict.judge import compare_with_references

    data = load_yaml(references).data
    if is_calibrated(data):  # `vgpu baseline calibrate`: the same two-sample statistics
        return compare_calibrated(cand, parse_references(data, str(references)),
                                  str(references), tolerance, levels)
    try:
        return compare_with_references(cand, _references(references), str(references),
                                       levels)
    except KeyError as exc:
        raise InputError.single(str(references), "(metric)", str(exc.args[0]),
                                fix="use metric names the candidate has") from None


def _reference_series(store: ResultStore, db: Path, reference: int | None,
                      baseline: str | None) -> SeriesData:
    from vgpu.results.store.series import load_series, series_of_run

    if baseline is None:
        assert reference is not None
        return load_series(store, series_of_run(store, reference))
    named = store.baseline(baseline)
    if named is None:
        raise InputError.single(str(db), "--baseline", f"no baseline named '{baseline}'",
                                fix="see `vgpu baseline list`")
    return load_series(store, named.series_id)


def _emit_comparison(comparison: Comparison, junit: Path | None, as_json_flag: bool) -> None:
    from vgpu.results.export.junit import write_junit

    if junit is not None:
        write_junit([comparison], junit)
    if as_json_flag:
        typer.echo(json.dumps(comparison.as_dict(), indent=2))
    else:
        _print_comparison(comparison)
    raise typer.Exit(exit_for(comparison.verdict))



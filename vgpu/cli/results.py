"""The results commands: ``vgpu results`` (list, read back, export or copy stored runs)
and ``vgpu report`` (the HTML/Markdown report)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from vgpu.cli import common
from vgpu.cli.checks import check_export
from vgpu.cli.options import DEFAULT_REPORT, DbOpt, ScenarioRef
from vgpu.cli.root import app
from vgpu.defaults import DEFAULT_DB

if TYPE_CHECKING:
    from vgpu.results.export.mlperf_export import MlperfExport


@app.command()
def results(
    db: DbOpt = DEFAULT_DB,
    scenario: ScenarioRef = None,
    status: Annotated[str | None, typer.Option("--status", help="running|ok|failed|aborted")]
    = None,
    export: Annotated[str | None, typer.Option(
        "--export", help="csv or json (to stdout), or mlperf DIR: an MLPerf Inference "
        "submission tree in folder DIR (needs --submitter)")] = None,
    export_dir: Annotated[Path | None, typer.Argument(
        metavar="[DIR]", help="with --export mlperf: the folder to write")] = None,
    submitter: Annotated[str | None, typer.Option(
        "--submitter", help="with --export mlperf: the submitting organization, the "
        "<submitter> level of the tree and the systems' submitter")] = None,
    division: Annotated[str, typer.Option(
        "--division", help="with --export mlperf: open (a smaller model variant is "
        "allowed) or closed")] = "open",
    copy_to: Annotated[str | None, typer.Option(
        "--copy-to", help="copy the finished runs (of --scenario, else all) with their "
        "instances, metrics, platforms and baselines into this store (a file or a "
        "postgresql:// URL); runs already there are skipped")] = None,
    run: Annotated[int | None, typer.Option(
        "--run", help="print run N read back: its instances with LoadGen validity and "
        "reasons, latency, throughput, telemetry and platform")] = None,
) -> None:
    """List stored runs, or export them (--export csv|json) to stdout, or write them as an
    MLPerf submission tree (--export mlperf DIR --submitter ORG), or print one run
    (--run N)."""
    from rich.table import Table

    from vgpu.results.export.mlperf_export import export_mlperf
    from vgpu.results.export.runs import export_csv, export_json
    from vgpu.results.store.copy import copy_stores
    from vgpu.results.store.result_store import ResultStore
    from vgpu.results.views.format import number
    from vgpu.results.views.runview import render_run

    if copy_to is not None:
        typer.echo(copy_stores(db, copy_to, scenario_id=scenario).describe())
        return
    check_export(export, export_dir, submitter)
    with ResultStore.open_existing(db) as store:
        if run is not None:
            render_run(store, run, common.console)
            return
        runs = store.runs(scenario_id=scenario, status=status)
        if export == "mlperf":
            assert export_dir is not None
            assert submitter is not None
            _print_mlperf_export(export_mlperf(store, runs, export_dir, submitter=submitter,
                                               division=division), export_dir)
            return
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
                number(total) if stored else "-",
                "-" if run.sync_skew_s is None else f"{run.sync_skew_s * 1e3:.1f}",
                escape(run.reason or ""),
            )
        common.console.print(table)


def _print_mlperf_export(done: MlperfExport, out: Path) -> None:
    for item in done.results:
        common.console.print(f"run {item.run_id} {escape(item.instance)} -> "
                             f"{escape(str(item.folder.relative_to(out)))}")
        for reason in item.not_submittable:
            common.console.print(f"  [yellow]not submittable:[/] {escape(reason)}")
    for system in done.systems:
        common.console.print(f"system {escape(str(system.relative_to(out)))}")
    for shown, keys in done.unknown_keys.items():
        common.console.print(f"[yellow]unknown to vgpu[/] in {escape(shown)}: "
                             f"{escape(', '.join(keys))} (set them there; kept when "
                             "exported again)")
    for problem in done.problems:
        common.console.print(f"[yellow]not submittable:[/] {escape(problem)}")
    for line in done.skipped:
        common.console.print(f"[yellow]not exported:[/] {escape(line)}")
    verdict = "submittable as far as vgpu checks" if done.submittable \
        else "NOT submittable (reasons above)"
    common.console.print(f"MLPerf submission tree in {escape(str(done.root))}: "
                         f"{len(done.results)} result(s), {len(done.systems)} system(s); "
                         f"{verdict}")


@app.command()
def report(
    db: DbOpt = DEFAULT_DB,
    out: Annotated[Path | None, typer.Option("--out", help="HTML file")] = DEFAULT_REPORT,
    markdown: Annotated[Path | None, typer.Option("--markdown", help="Markdown file")] = None,
    png_dir: Annotated[Path | None, typer.Option("--png-dir", help="write the charts "
                                                 "as PNG files here")] = None,
    tolerance: Annotated[float, typer.Option("--tolerance", min=0.0, help="percent, for "
                                             "series whose run stored no reference "
                                             "(>= 0)")] = 2.0,
    history: Annotated[bool, typer.Option("--history", help="every stored series, not "
                                          "only the latest of each scenario, workload "
                                          "and target and their references")] = False,
) -> None:
    """Write the results report: self-contained HTML, optional Markdown and PNGs."""
    from vgpu.results.store.result_store import ResultStore
    from vgpu.results.views.report import build_report, write_report

    with ResultStore.open_existing(db) as store:
        built = build_report(store, tolerance=tolerance / 100.0, history=history)
    if markdown is not None and png_dir is None:
        png_dir = markdown.parent / f"{markdown.stem}-png"
    written = write_report(built, out, markdown, png_dir)
    for path in written:
        common.console.print(f"wrote {path}")

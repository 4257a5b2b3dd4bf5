"""Benchmark and results commands: bench, results, baseline, compare, report."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any, cast

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from vgpu import catalog
from vgpu.bench.job import BenchRequest, TwinChoice, bench_with_twin
from vgpu.bench.runtime import (
    RUNTIMES,
    Runtime,
    RuntimeOptions,
)
from vgpu.bench.summary import as_json, render
from vgpu.bench.twin import baseline_scenario
from vgpu.bench.workload import DEFAULT_MAX_CLOCK_OFFSET_MS, BenchOverrides
from vgpu.cli import common
from vgpu.cli.common import scenario_from_args
from vgpu.cli.options import (
    DEFAULT_BASE,
    BaseImageOpt,
    DbOpt,
    DockerHostOpt,
    FullModelsOpt,
    ImageOpt,
    JsonOpt,
    RunsOpt,
    RuntimeOpt,
    ScenarioFile,
    ScenarioRef,
    inventory_option,
)
from vgpu.cli.root import app, err_console
from vgpu.cli.train_view import train_and_report
from vgpu.errors import InputError, RemoteError, VerdictFailed
from vgpu.model.load import load_inventory
from vgpu.model.scenario import InferenceWorkload, Scenario
from vgpu.model.yamlsource import load_yaml
from vgpu.results.calibration import (
    calibrate,
    compare_calibrated,
    is_calibrated,
    parse_references,
    write_references,
)
from vgpu.results.compare import Comparison, Reference
from vgpu.results.copy import copy_stores
from vgpu.results.export import export_csv, export_json
from vgpu.results.format import number
from vgpu.results.judge import compare_series, compare_with_references, default_kind
from vgpu.results.junit import write_junit
from vgpu.results.mlperf_export import MlperfExport, export_mlperf
from vgpu.results.noise import NoiseLevels
from vgpu.results.noise_store import levels_for
from vgpu.results.platforms import describe_changes
from vgpu.results.report import build_report, write_report
from vgpu.results.runview import render_run
from vgpu.results.series import SeriesData, load_series, series_of_run
from vgpu.results.store import DEFAULT_DB, ResultStore
from vgpu.revalidate.flow import baseline_key

DEFAULT_REPORT = Path("vgpu-report.html")
_STYLE = {"PASS": "bold green", "FAIL": "bold red", "INCONCLUSIVE": "bold yellow"}

baseline_app = typer.Typer(help="Name runs as baselines for later comparisons.",
                           no_args_is_help=True)
app.add_typer(baseline_app, name="baseline")


BenchInventoryOpt = Annotated[Path | None, inventory_option(
    "run on the scenario's VMs / bare-metal hosts of this inventory; none found: this machine",
    without="running on this machine")]
DurationOpt = Annotated[float | None, typer.Option(
    "--duration", help="LoadGen min duration per run in seconds (default: the "
    "workload's; on a CPU its cpu_duration_s)")]
WorkloadOpt = Annotated[list[str] | None, typer.Option(
    "--workload", "-w", help="run only this workload (repeatable)")]
ReportOpt = Annotated[Path | None, typer.Option("--report", help="HTML report to write")]
NoReportOpt = Annotated[bool, typer.Option("--no-report", help="write no report")]
AllowCpuOpt = Annotated[bool, typer.Option(
    "--allow-cpu", help="with --inventory: run instances whose planned GPU the harness "
    "cannot use on the CPU instead of failing them (a functional check, recorded as such)")]
WithBaselineOpt = Annotated[bool, typer.Option(
    "--with-baseline", help="first run the scenario's baseline scenario (e.g. bm6 for 6) "
    "on the same targets and settings even when a run of it is stored")]
NoBaselineOpt = Annotated[bool, typer.Option(
    "--no-baseline", help="do not run the baseline scenario first, even when no run of "
    "it is stored (default: run it, so the run ends in a verdict)")]
TritonUrlOpt = Annotated[str | None, typer.Option(
    "--triton-url", help="HOST:PORT (gRPC) of a running Triton server for the workloads "
    "with backend triton: nothing is deployed (default: a server container per host)")]
MinValidOpt = Annotated[int | None, typer.Option(
    "--min-valid", min=1, help="fewest repeats LoadGen must find VALID for a PASS; fewer "
    "make the verdict INCONCLUSIVE (default: the workload's min_valid, else every repeat)")]
TritonImageOpt = Annotated[str | None, typer.Option(
    "--triton-image", help="tritonserver image deployed for the workloads with backend "
    "triton (default: the scenario's guest.triton_image)")]
MlperfRulesOpt = Annotated[bool, typer.Option(
    "--mlperf-rules", help="run under MLPerf rules: LoadGen's official settings from its "
    "built-in mlperf.conf (seeds, min duration 600 s, min query counts, latency targets); "
    "with --duration the run is shorter and recorded as not compliant")]
MaxClockOffsetOpt = Annotated[float, typer.Option(
    "--max-clock-offset-ms", help="with --inventory: refuse the synchronised start when a "
    "host's clock is further than this from this machine's (measured over SSH)")]
UntilDecidedOpt = Annotated[bool, typer.Option(
    "--until-decided", help="after --runs (the pilot), keep repeating each series until "
    "its verdict against the baseline is decided or --max-repeats is reached "
    "(sequential design with error rates <= 5%, docs/results.md)")]
MaxRepeatsOpt = Annotated[int | None, typer.Option(
    "--max-repeats", min=2, help="cap of --until-decided / --budget (default 20)")]
BudgetOpt = Annotated[str | None, typer.Option(
    "--budget", help="wall time for the scenario's series, e.g. 45m, 2h, 900s: after each "
    "workload's pilot, repeats until decided within its share of what is left")]
InjectSlowdownOpt = Annotated[float | None, typer.Option(
    "--inject-slowdown", help="PERCENT: slow the scenario's own instances by this share "
    "(busy waiting after each batch; its bare-metal twin runs unslowed, interleaved) to "
    "check what the verdict finds; stored under its own workload key, never a measurement")]
_UNITS_S = {"s": 1.0, "m": 60.0, "h": 3600.0}


def _budget_s(text: str | None) -> float | None:
    """``45m`` / ``2h`` / ``900s`` / ``900`` in seconds."""
    if text is None:
        return None
    unit = text[-1].lower() if text and text[-1].isalpha() else "s"
    number_part = text[:-1] if text and text[-1].isalpha() else text
    try:
        seconds = float(number_part) * _UNITS_S[unit]
    except (KeyError, ValueError):
        seconds = -1.0
    if seconds <= 0:
        raise InputError.single("command line", "--budget", f"not a duration: {text!r}",
                                fix="give e.g. 45m, 2h or 900s")
    return seconds


def _positive(value: float | None, flag: str) -> None:
    if value is not None and value <= 0:
        raise InputError.single("command line", flag, f"must be > 0, got {value}",
                                fix=f"give {flag} a positive number")


@app.command()
def bench(
    ctx: typer.Context,
    file: ScenarioFile = None,
    scenario: ScenarioRef = None,
    inventory: BenchInventoryOpt = None,
    runs: RunsOpt = None,
    duration: DurationOpt = None,
    workload: WorkloadOpt = None,
    full_models: FullModelsOpt = False,
    db: DbOpt = DEFAULT_DB,
    report: ReportOpt = DEFAULT_REPORT,
    no_report: NoReportOpt = False,
    as_json_flag: JsonOpt = False,
    allow_cpu: AllowCpuOpt = False,
    with_baseline: WithBaselineOpt = False,
    no_baseline: NoBaselineOpt = False,
    runtime: RuntimeOpt = None,
    image: ImageOpt = None,
    base_image: BaseImageOpt = DEFAULT_BASE,
    docker_host: DockerHostOpt = None,
    triton_url: TritonUrlOpt = None,
    triton_image: TritonImageOpt = None,
    min_valid: MinValidOpt = None,
    mlperf_rules: MlperfRulesOpt = False,
    max_clock_offset_ms: MaxClockOffsetOpt = DEFAULT_MAX_CLOCK_OFFSET_MS,
    until_decided: UntilDecidedOpt = False,
    max_repeats: MaxRepeatsOpt = None,
    budget: BudgetOpt = None,
    inject_slowdown: InjectSlowdownOpt = None,
) -> None:
    """Run a scenario's inference workloads on every target at once (synchronised start),
    repeated; store the runs, print statistics and the verdict against the baseline.
    With no stored run of the baseline scenario (the bare-metal twin, e.g. bm6 for 6),
    that runs first on the same targets, unless --no-baseline."""
    sc = scenario_from_args(file, scenario)
    named_inventory = inventory
    inventory = _where_it_runs(sc, inventory, _found_not_named(ctx))
    if inventory is None and named_inventory is not None and runtime is None:
        runtime, image, base_image, docker_host = _simulator_lab_reference(
            named_inventory, image, base_image, docker_host)
    _check_counts(runs, duration)
    _positive(max_clock_offset_ms, "--max-clock-offset-ms")
    if inject_slowdown is not None and not 0 < inject_slowdown < 90:
        raise InputError.single("command line", "--inject-slowdown",
                                f"must be a percentage above 0 and below 90, got "
                                f"{inject_slowdown:g}", fix="give e.g. --inject-slowdown 10")
    if with_baseline and no_baseline:
        raise InputError.single("command line", "--with-baseline/--no-baseline",
                                "the two contradict each other", fix="give one of them")
    if not any(isinstance(w, InferenceWorkload) for w in sc.workloads):
        _bench_training(sc, runs, inventory, full_models, db,
                        with_baseline or bool(workload) or duration is not None
                        or mlperf_rules)
        return
    _check_workloads(sc, workload)
    deploys = _check_triton(sc, workload, triton_url, triton_image)
    if inventory is not None and runtime is None and _on_simulator_guests(inventory):
        runtime, allow_cpu = _simulator_runtime(inventory), True
    request = BenchRequest(inventory, runs, workload,
                           BenchOverrides(duration_s=duration, full_models=full_models,
                                          triton_url=triton_url, mlperf_rules=mlperf_rules,
                                          min_valid=min_valid,
                                          max_clock_offset_ms=max_clock_offset_ms,
                                          until_decided=until_decided,
                                          max_repeats=max_repeats,
                                          budget_s=_budget_s(budget),
                                          slowdown=(inject_slowdown or 0.0) / 100.0),
                           allow_cpu, _runtime_options(runtime, image, base_image, docker_host,
                                                       inventory is not None, deploys),
                           triton_image)
    names_twin = sc.baseline is not None and sc.baseline.scenario is not None
    if with_baseline or (names_twin and not no_baseline):
        baseline_scenario(sc)  # a missing or broken twin is an input error before any run
    if inventory is not None:
        load_inventory(catalog.resolve_inventory(inventory))  # input errors before any run
    out = Console(stderr=True) if as_json_flag else common.console
    report_path = None if no_report else report
    with ResultStore.open(db) as store:
        outcome = bench_with_twin(sc, request, store, out=out, quiet=as_json_flag,
                                  twin=TwinChoice(force=with_baseline, skip=no_baseline))
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


def _found_not_named(ctx: typer.Context) -> bool:
    """The inventory was found by the defaults (./vgpu-inventory.yaml, the user's default),
    not named with --inventory or $VGPU_INVENTORY."""
    source = ctx.get_parameter_source("inventory")
    return ((source is None or source.name == "DEFAULT")
            and not os.environ.get(catalog.INVENTORY_ENV, "").strip())


def _where_it_runs(sc: Scenario, inventory: Path | None, found: bool) -> Path | None:
    """The inventory the run uses, said on the line after the inventory's: a found (not
    named) inventory never sends a scenario to hosts it does not describe. A simulator
    lab's scenario runs on its guests when `vgpu apply` made them, else here; a bare-metal
    scenario runs here unless the inventory lists bare-metal hosts."""
    from vgpu.sim import follow

    say = err_console.print
    if inventory is None:
        return None
    path = catalog.resolve_inventory(inventory)
    inv = load_inventory(path)
    shown = str(path) if path.is_absolute() or str(path).startswith(".") else f"./{path}"
    if sc.platform == "bare-metal":
        if found and not inv.bare_metal:
            say(f"running on this machine: scenario {sc.id} is bare metal and {shown} lists "
                "no bare-metal hosts (pass --inventory to run on other hosts)",
                markup=False, highlight=False)
            return None
        return inventory
    guests = follow.scenario_guests(sc, inv, path)
    if guests is None:
        return inventory
    if guests:
        how = ("in its own container" if follow.guest_runtime(path) == "container"
               else "in its venv")
        say(f"running on the simulator lab's VMs: {', '.join(g.vm for g in guests)} "
            f"(simulated guests: each harness instance {how} on the CPU, a functional check)",
            markup=False, highlight=False)
        return inventory
    if found:
        say(f"running on this machine: the simulator lab in {shown} has no VMs of scenario "
            f"{sc.id} (`vgpu apply --scenario {sc.id} --yes` makes them)",
            markup=False, highlight=False)
        return None
    return inventory


def _on_simulator_guests(inventory: Path) -> bool:
    from vgpu.sim import follow

    return follow.lab_of(catalog.resolve_inventory(inventory)) is not None


def _simulator_lab_reference(inventory: Path, image: str | None, base_image: str,
                             docker_host: str | None,
                             ) -> tuple[str | None, str | None, str, str | None]:
    """A run on this machine next to a simulator lab with a Docker daemon (its bare-metal
    reference) uses the guests' harness image in that daemon, so both sides run the same
    harness, ONNX Runtime and container runtime; else it runs as asked."""
    from vgpu.container.images import default_tag
    from vgpu.sim import dockerd, follow

    path = catalog.resolve_inventory(inventory)
    daemon = follow.lab_daemon(path) if path.exists() else None
    if daemon is None or docker_host is not None or image is not None:
        return None, image, base_image, docker_host
    err_console.print("on this machine in containers of the simulator lab's harness image "
                      "(its Docker daemon), as on the lab's guests", markup=False,
                      highlight=False)
    return "container", default_tag(), dockerd.BASE_TAG, daemon.host


def _simulator_runtime(inventory: Path) -> Runtime:
    from vgpu.sim import follow

    return follow.guest_runtime(catalog.resolve_inventory(inventory))


def _check_counts(runs: int | None, duration: float | None) -> None:
    if runs is not None and runs < 1:
        raise InputError.single("command line", "--runs", f"must be >= 1, got {runs}",
                                fix="give --runs 1 or more")
    _positive(duration, "--duration")


def _check_workloads(sc: Scenario, wanted: list[str] | None) -> None:
    known = [w.label for w in sc.workloads]
    for name in wanted or []:
        if name not in known:
            raise InputError.single(sc.source or "scenario", "--workload",
                                    f"no workload named '{name}'",
                                    fix=f"use one of: {', '.join(known)}")


def _check_triton(sc: Scenario, wanted: list[str] | None, url: str | None,
                  image: str | None) -> bool:
    """Whether a Triton server will be deployed (a chosen workload has backend triton and
    no --triton-url names a running one)."""
    if url is not None:
        host, _, port = url.rpartition(":")
        if "://" in url or not host or not port.isdigit():
            raise InputError.single("command line", "--triton-url", f"'{url}' is not "
                                    "HOST:PORT", fix="give the server's gRPC address, e.g. "
                                    "10.0.0.5:8001")
        if image is not None:
            raise InputError.single("command line", "--triton-image", "nothing is deployed "
                                    "with --triton-url", fix="give one of the two")
    chosen = [w for w in sc.workloads if isinstance(w, InferenceWorkload)
              and (not wanted or w.label in wanted)]
    return url is None and any(w.backend == "triton" for w in chosen)


def _runtime_options(runtime: str | None, image: str | None, base_image: str,
                     docker_host: str | None, remote: bool,
                     triton_here: bool = False) -> RuntimeOptions:
    if runtime is not None and runtime not in RUNTIMES:
        raise InputError.single("command line", "--runtime", f"'{runtime}' is not a runtime",
                                fix=f"use one of: {', '.join(RUNTIMES)}")
    given = [flag for flag, value in (("--image", image), ("--docker-host", docker_host))
             if value is not None]
    if given and remote:
        raise InputError.single("command line", "/".join(given),
                                "applies to containers on this machine only; on an "
                                "inventory's guests the image is the one `vgpu provision` "
                                "made and the daemon is the inventory's docker.host",
                                fix="leave it out, or set docker.host in the inventory")
    if triton_here:  # the Triton server container goes to --docker-host as well
        given = [flag for flag in given if flag != "--docker-host"]
    if given and runtime != "container":
        raise InputError.single("command line", "/".join(given),
                                "applies only to --runtime container",
                                fix="add --runtime container or leave it out")
    return RuntimeOptions(runtime=cast(Runtime | None, runtime), image=image,
                          base_image=base_image, docker_host=docker_host)


def _bench_training(sc: Scenario, runs: int | None, inventory: Path | None,
                    full_models: bool, db: Path, inference_only_options: bool) -> None:
    """A training scenario (e.g. train_multinode_4): torchrun on every node."""
    if inference_only_options:
        raise InputError.single("command line",
                                "--with-baseline/--workload/--duration/--mlperf-rules",
                                f"scenario {sc.id} has only training workloads; these "
                                "options apply to inference", fix="leave them out")
    train_and_report(sc, inventory, runs, full_models, db)


def _text(path: Path | None) -> str | None:
    return None if path is None else str(path)


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
    if copy_to is not None:
        typer.echo(copy_stores(db, copy_to, scenario_id=scenario).describe())
        return
    _check_export(export, export_dir, submitter)
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


def _check_export(export: str | None, export_dir: Path | None,
                  submitter: str | None) -> None:
    if export not in (None, "csv", "json", "mlperf"):
        raise InputError.single("command line", "--export", f"'{export}' is not a format",
                                fix="use --export csv, --export json or --export mlperf DIR")
    if export == "mlperf" and export_dir is None:
        raise InputError.single("command line", "--export mlperf", "needs the folder to "
                                "write", fix="give it after the format: --export mlperf DIR")
    if export != "mlperf" and export_dir is not None:
        raise InputError.single("command line", "DIR", f"'{export_dir}' is only taken by "
                                "--export mlperf", fix="leave it out or add --export mlperf")
    if export == "mlperf" and submitter is None:
        raise InputError.single("command line", "--submitter", "--export mlperf writes a "
                                "submission tree, which names its submitter",
                                fix="add --submitter ORG (your organization)")


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
    if name is not None and in_set is not None:
        raise InputError.single("command line", "--name/--set", "give one of the two",
                                fix="--set for `vgpu revalidate`, --name for `vgpu compare`")
    with ResultStore.open_existing(db) as store:
        if in_set is not None:
            run = store.run(run_id)
            if run is not None:
                name = baseline_key(in_set, run.scenario_id, run.workload.split(" (")[0])
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
    Exit code 3 when the verdict is FAIL."""
    _check_compare_inputs(reference, baseline, references, kind)
    with ResultStore.open_existing(db) as store:
        cand = load_series(store, series_of_run(store, candidate))
        levels = levels_for(store, cand)
        if references is not None:
            comparison = _against_references(cand, references, tolerance / 100.0, levels)
        else:
            ref = _reference_series(store, db, reference, baseline)
            chosen: Any = kind or ("run-vs-baseline" if baseline else default_kind(cand, ref))
            comparison = compare_series(
                chosen, cand, ref, tolerance=tolerance / 100.0,
                min_gain=None if min_gain is None else min_gain / 100.0, levels=levels,
            )
    _emit_comparison(comparison, junit, as_json_flag)


def _check_compare_inputs(reference: int | None, baseline: str | None,
                          references: Path | None, kind: str | None) -> None:
    given = [x for x in (reference, baseline, references) if x is not None]
    if len(given) != 1:
        raise InputError.single("command line", "REFERENCE / --baseline / --references",
                                f"{len(given)} references given",
                                fix="give exactly one of them")
    kinds = ("vm-vs-bare-metal", "scenario-vs-scenario", "run-vs-baseline")
    if kind is not None and kind not in kinds:
        raise InputError.single("command line", "--kind", f"'{kind}' is not a kind",
                                fix=f"use one of: {', '.join(kinds)}")


def _against_references(cand: SeriesData, references: Path,
                        tolerance: float, levels: NoiseLevels) -> Comparison:
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
    if baseline is None:
        assert reference is not None
        return load_series(store, series_of_run(store, reference))
    named = store.baseline(baseline)
    if named is None:
        raise InputError.single(str(db), "--baseline", f"no baseline named '{baseline}'",
                                fix="see `vgpu baseline list`")
    return load_series(store, named.series_id)


def _emit_comparison(comparison: Comparison, junit: Path | None, as_json_flag: bool) -> None:
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

"""The ``vgpu bench`` command: a scenario's workloads on its targets, judged against its
baseline; where it runs (an inventory's hosts, a simulator lab's guests, this machine)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from vgpu.cli import common
from vgpu.cli.checks import (
    budget_s,
    check_counts,
    check_positive,
    check_slowdown,
    check_triton,
    check_workloads,
    runtime_options,
)
from vgpu.cli.common import scenario_from_args
from vgpu.cli.options import (
    DEFAULT_BASE,
    DEFAULT_REPORT,
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
from vgpu.defaults import DEFAULT_DB, DEFAULT_MAX_CLOCK_OFFSET_MS
from vgpu.errors import InputError, RemoteError

if TYPE_CHECKING:
    from vgpu.model.scenario import Scenario
    from vgpu.site import Site

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
    "--max-repeats", min=2, help="cap of --until-decided / --budget (default 40 blocks "
    "interleaved with the bare-metal twin, else 20 repeats)")]
BudgetOpt = Annotated[str | None, typer.Option(
    "--budget", help="wall time for the scenario's series, e.g. 45m, 2h, 900s: after each "
    "workload's pilot, repeats until decided within its share of what is left")]
InjectSlowdownOpt = Annotated[float | None, typer.Option(
    "--inject-slowdown", help="PERCENT: slow the scenario's own instances by this share "
    "(busy waiting after each batch; its bare-metal twin runs unslowed, interleaved) to "
    "check what the verdict finds; stored under its own workload key, never a measurement")]
SimulatedGpuOpt = Annotated[bool, typer.Option(
    "--simulated-gpu", help="on this machine without a GPU: pace each instance as a "
    "SIMULATED GPU of its planned slices (the CPU computes, completions come at a device's "
    "rate with a GPU's 0.5% run-to-run noise) under a GPU's run-length rules, to see the "
    "time plan and the verdict's design on a GPU's noise; stored under its own workload "
    "key, never a measurement")]


@app.command()
def bench(
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
    simulated_gpu: SimulatedGpuOpt = False,
) -> None:
    """Run a scenario's inference workloads on every target at once (synchronised start),
    repeated; store the runs, print statistics and the verdict against the baseline.
    With no stored run of the baseline scenario (the bare-metal twin, e.g. bm6 for 6),
    that runs first on the same targets, unless --no-baseline. Ends with the verdict of
    the whole scenario (PASS only if every workload PASSes, FAIL if any FAILs, else
    INCONCLUSIVE naming the undecided workload). Exit 0 PASS, 3 FAIL, 4 INCONCLUSIVE,
    5 nothing to judge against, 1 could not run, 2 bad input."""
    from vgpu.model.scenario import InferenceWorkload
    from vgpu.targets.where import HarnessChoice, harness_choice, runs_on

    sc = scenario_from_args(file, scenario)
    site = common.site_of(inventory)  # the inventory's input errors before any run
    where = runs_on(sc, site)
    _say(where.said)
    harness = harness_choice(site, where, HarnessChoice(runtime, image, base_image,
                                                        docker_host, allow_cpu))
    _say(harness.said)
    runs_on_site = where.site
    check_counts(runs, duration)
    check_positive(max_clock_offset_ms, "--max-clock-offset-ms")
    if inject_slowdown is not None and not 0 < inject_slowdown < 90:
        raise InputError.single("command line", "--inject-slowdown",
                                f"must be a percentage above 0 and below 90, got "
                                f"{inject_slowdown:g}", fix="give e.g. --inject-slowdown 10")
    if simulated_gpu and not where.here:
        raise InputError.single("command line", "--simulated-gpu",
                                "runs on this machine only; the scenario runs on the "
                                "inventory's hosts", fix="leave --simulated-gpu out (a "
                                "simulator lab paces its guests as GPUs with `vgpu sim up "
                                "--device-model gpu`)")
    if simulated_gpu:
        _no_gpu_here()
    if with_baseline and no_baseline:
        raise InputError.single("command line", "--with-baseline/--no-baseline",
                                "the two contradict each other", fix="give one of them")
    if not any(isinstance(w, InferenceWorkload) for w in sc.workloads):
        _bench_training(sc, runs, runs_on_site, full_models, db,
                        with_baseline or bool(workload) or duration is not None
                        or mlperf_rules)
        return
    check_workloads(sc, workload)
    check_slowdown(sc, workload, inject_slowdown)
    deploys = check_triton(sc, workload, triton_url, triton_image)
    # The inputs are checked: load what runs the benchmark.
    from vgpu.bench.job import BenchRequest, TwinChoice, bench_with_twin
    from vgpu.bench.progress import CommandListener
    from vgpu.bench.summary import as_json, render
    from vgpu.bench.twin import baseline_scenario
    from vgpu.bench.verdict import scenario_verdict
    from vgpu.bench.workload import BenchOverrides
    from vgpu.results.store.result_store import ResultStore
    from vgpu.results.views.report import build_report, write_report

    request = BenchRequest(runs_on_site, runs, workload,
                           BenchOverrides(duration_s=duration, full_models=full_models,
                                          triton_url=triton_url, mlperf_rules=mlperf_rules,
                                          min_valid=min_valid,
                                          max_clock_offset_ms=max_clock_offset_ms,
                                          until_decided=until_decided,
                                          max_repeats=max_repeats,
                                          budget_s=budget_s(budget),
                                          slowdown=(inject_slowdown or 0.0) / 100.0,
                                          simulated_gpu=simulated_gpu),
                           harness.allow_cpu,
                           runtime_options(harness.runtime, harness.image, harness.base_image,
                                           harness.docker_host,
                                           runs_on_site.inventory is not None, deploys),
                           triton_image)
    names_twin = sc.baseline is not None and sc.baseline.scenario is not None
    if with_baseline or (names_twin and not no_baseline):
        baseline_scenario(sc)  # a missing or broken twin is an input error before any run
    out = Console(stderr=True) if as_json_flag else common.console
    report_path = None if no_report else report
    with ResultStore.open(db) as store:
        outcome = bench_with_twin(sc, request, store,
                                  twin=TwinChoice(force=with_baseline, skip=no_baseline),
                                  listener=CommandListener(out, quiet=as_json_flag))
        if report_path is not None:
            write_report(build_report(store, outcome.comparisons), report_path)
    if as_json_flag:
        typer.echo(json.dumps(as_json(outcome, str(db), _text(report_path)), indent=2))
    else:
        render(outcome, out, str(db), _text(report_path), judged=True)
    if outcome.failure:
        raise RemoteError(outcome.failure)
    raise typer.Exit(scenario_verdict(outcome).exit_code)


def _say(line: str | None) -> None:
    """Where the run goes, said on the line after the inventory's."""
    if line is not None:
        err_console.print(line, markup=False, highlight=False)


def _no_gpu_here() -> None:
    """--simulated-gpu on a machine with a real GPU would hide the GPU: refused."""
    from vgpu.targets import devices

    real = [d for d in devices.discover() if d.kind != "cpu" and not d.simulated]
    if real:
        raise InputError.single("command line", "--simulated-gpu",
                                f"this machine has a GPU ({real[0].name}): a simulated one "
                                "would hide it", fix="leave --simulated-gpu out")


def _bench_training(sc: Scenario, runs: int | None, site: Site,
                    full_models: bool, db: Path, inference_only_options: bool) -> None:
    """A training scenario (e.g. train_multinode_4): torchrun on every node."""
    from vgpu.cli.train_view import train_and_report

    if inference_only_options:
        raise InputError.single("command line",
                                "--with-baseline/--workload/--duration/--mlperf-rules",
                                f"scenario {sc.id} has only training workloads; these "
                                "options apply to inference", fix="leave them out")
    train_and_report(sc, site, runs, full_models, db)


def _text(path: Path | None) -> str | None:
    return None if path is None else str(path)



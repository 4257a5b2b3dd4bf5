"""Stored runs as an MLPerf Inference v6.1 submission tree, the layout the MLCommons
submission checker reads::

    DIR/<division>/<submitter>/systems/<system>.json
    DIR/<division>/<submitter>/src/                 (the harness that produced the runs)
    DIR/<division>/<submitter>/model_mapping.json   (open: a smaller variant -> benchmark)
    DIR/<division>/<submitter>/results/<system>/<benchmark>/<scenario>/
        README.md, user.conf, measurements.json
        performance/run_1/mlperf_log_{summary,detail}.txt, mlperf_log_accuracy.json
        accuracy/mlperf_log_{summary,detail}.txt, mlperf_log_accuracy.json, accuracy.txt

A system is one VM, or one bare-metal host (one per harness instance when a host ran
several, e.g. MIG tenants). Per system, benchmark and scenario the latest ok run with an
accuracy pass is exported; the LoadGen logs are copied byte for byte, except an accuracy
log over the checker's 10 KiB, which is truncated with the full log's sha256 in
accuracy.txt. Every reason a result is not submittable is listed (README.md and the
command's output). Only the files of this layout are written: re-exporting replaces them
(keeping system-description values the user filled in), anything else in DIR is left
alone."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import loadgen
from loadgen.contract import RunResult
from vgpu import __version__
from vgpu.errors import InputError
from vgpu.results.export import mlperf_system
from vgpu.results.export.mlperf_rules import missing_scenarios, not_submittable
from vgpu.results.store.records import Platform, Run, StoredInstance
from vgpu.results.store.result_store import ResultStore

SUMMARY_LOG = "mlperf_log_summary.txt"
DETAIL_LOG = "mlperf_log_detail.txt"
ACCURACY_LOG = "mlperf_log_accuracy.json"
ACCURACY_TEXT = "accuracy.txt"
README = "README.md"
PERFORMANCE_LOGS = (SUMMARY_LOG, DETAIL_LOG, ACCURACY_LOG)
ACCURACY_PASS_DIR = "accuracy"  # where the harness keeps the accuracy pass's LoadGen logs
EMPTY_ACCURACY_LOG = "[\n]\n"  # what LoadGen writes in PerformanceOnly mode
MAX_ACCURACY_LOG_BYTES = 10 * 1024  # larger accuracy logs are truncated in a submission
KEPT_LOG_BYTES = 4 * 1024  # of a truncated log: this much of its start and of its end
FULL_VARIANTS = (None, "full", "large")
# model llm's declared sizes, as MLCommons names the benchmarks; tiny stays llm-tiny
TOKEN_CONF_KEYS = ("use_token_latencies", "ttft_latency", "tpot_latency")
LLM_BENCHMARKS = {"8b": "llama3.1-8b", "70b": "llama2-70b-99"}
DIVISIONS = ("open", "closed")
SRC_HARNESS = "vgpu-loadgen-harness"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class ExportedResult:
    run_id: int
    instance: str
    folder: Path
    not_submittable: tuple[str, ...] = ()


@dataclass
class MlperfExport:
    root: Path = Path()
    results: list[ExportedResult] = field(default_factory=list)
    systems: list[Path] = field(default_factory=list)
    unknown_keys: dict[str, list[str]] = field(default_factory=dict)  # system -> keys
    problems: list[str] = field(default_factory=list)  # submission-wide reasons
    skipped: list[str] = field(default_factory=list)  # run/instance and why

    @property
    def submittable(self) -> bool:
        return not self.problems and not any(r.not_submittable for r in self.results)


def _safe(name: str) -> str:
    return _UNSAFE.sub("_", name).strip("_") or "unnamed"


def benchmark_name(detail: dict[str, Any]) -> str:
    """The MLCommons benchmark: resnet50, bert-99 / bert-99.9 (by the accuracy target);
    a smaller variant keeps its name (resnet50-tiny), so that it is never taken for the
    benchmark; an ONNX file is named after the file."""
    model = str(detail.get("model") or "model")
    if model.endswith(".onnx"):
        return _safe(Path(model).stem)
    name = model
    if model == "llm" and detail.get("variant") in LLM_BENCHMARKS:
        return LLM_BENCHMARKS[str(detail.get("variant"))]
    if model == "bert":
        target = (detail.get("accuracy") or {}).get("target")
        name = "bert-99.9" if target is not None and target >= 0.999 else "bert-99"
    variant = detail.get("variant")
    return name if variant in FULL_VARIANTS else f"{name}-{_safe(str(variant))}"


def system_name(run: Run, instance: StoredInstance, shared_host: bool) -> str:
    """A VM is its own system, named after the VM; a bare-metal host is one, named
    ``bm-<host name>`` (split per instance when the run had several instances on it), so
    that a bare-metal system is never read as a VM whatever the host is called."""
    platform = instance.result.platform or Platform()
    if run.target_kind == "vm":
        return _safe(instance.result.name)
    host = f"bm-{_safe(platform.host or 'localhost')}"
    return f"{host}_{_safe(instance.result.name)}" if shared_host else host


def _record(instance: StoredInstance) -> RunResult:
    return instance.result.run_result


def _copy_logs(source: Path, names: tuple[str, ...], target: Path) -> list[str]:
    target.mkdir(parents=True, exist_ok=True)
    copied = []
    for name in names:
        if (source / name).is_file():
            shutil.copyfile(source / name, target / name)
            copied.append(name)
    return copied


def _write_performance(log_dir: Path, folder: Path) -> None:
    run_1 = folder / "performance" / "run_1"
    # log_dir's accuracy log is the accuracy pass's; the timed run logged none.
    _copy_logs(log_dir, (SUMMARY_LOG, DETAIL_LOG), run_1)
    (run_1 / ACCURACY_LOG).write_text(EMPTY_ACCURACY_LOG)


def truncated_accuracy_log(data: bytes) -> bytes:
    """A log over the submission's size limit keeps its first and last 4 KiB."""
    if len(data) <= MAX_ACCURACY_LOG_BYTES:
        return data
    return data[:KEPT_LOG_BYTES] + b"\n...\n" + data[-KEPT_LOG_BYTES:]


def accuracy_text(accuracy: dict[str, Any], log_sha256: str) -> str:
    """accuracy.txt: the score (an ``accuracy=`` line only for a top-1 against dataset
    labels, the ImageNet metric; agreement with the fp32 reference is named as such), then
    ``hash=`` the sha256 of the full accuracy log."""
    value = accuracy.get("value")
    lines = []
    if accuracy.get("metric") == "top1" and isinstance(value, (int, float)):
        lines.append(f"accuracy={value * 100:.3f}%, labels: {accuracy.get('labels_from')}")
    lines.append(f"vgpu {accuracy.get('metric')}: {value}")
    for key in ("target", "threshold", "samples", "passed", "labels_from"):
        lines.append(f"vgpu {key}: {accuracy.get(key)}")
    lines.append(f"hash={log_sha256}")
    return "\n".join(lines) + "\n"


def _write_accuracy(log_dir: Path, accuracy: dict[str, Any], folder: Path) -> None:
    target = folder / "accuracy"
    _copy_logs(log_dir / ACCURACY_PASS_DIR, (SUMMARY_LOG, DETAIL_LOG), target)
    full = (log_dir / ACCURACY_LOG).read_bytes() if (log_dir / ACCURACY_LOG).is_file() \
        else b""
    (target / ACCURACY_LOG).write_bytes(truncated_accuracy_log(full))
    (target / ACCURACY_TEXT).write_text(
        accuracy_text(accuracy, hashlib.sha256(full).hexdigest()))


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")


def _token_conf(record: RunResult) -> dict[str, Any]:
    """The token-latency settings LoadGen ran with (model llm): mlperf.conf's
    use_token_latencies, ttft_latency and tpot_latency (ns)."""
    tokens = record.tokens or {}
    targets = tokens.get("targets_ms") or {}
    if not tokens:
        return {}
    return {"use_token_latencies": 1,
            "ttft_latency": round(targets["ttft_p99"] * 1e6) if targets else None,
            "tpot_latency": round(targets["tpot_p99"] * 1e6) if targets else None}


def _conf_lines(benchmark: str, scenario: str, settings: dict[str, Any]) -> list[str]:
    prefix = f"{benchmark}.{scenario}"
    wanted = {"target_qps": settings.get("target_qps"),
              "target_latency": _ns_to_ms(settings.get("target_latency_ns")),
              "min_duration": settings.get("min_duration_ms"),
              "min_query_count": settings.get("min_query_count"),
              "performance_sample_count_override": settings.get("performance_sample_count"),
              "samples_per_query": settings.get("samples_per_query")
              if scenario == "MultiStream" else None,
              **{key: settings.get(key) for key in TOKEN_CONF_KEYS}}
    return [f"{prefix}.{key} = {_conf_value(value)}" for key, value in wanted.items()
            if value not in (None, 0)]


def _ns_to_ms(value: Any) -> float | None:
    return None if not value else float(value) / 1e6


def _conf_value(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def user_conf(run: Run, instance: StoredInstance, benchmark: str) -> str:
    """The LoadGen settings this run used, in mlperf.conf syntax: under MLPerf rules only
    what a user.conf may set (the expected QPS / latency), else every setting that made
    the run differ from the rules."""
    record = _record(instance)
    settings = dict(record.settings)
    rules = record.mlperf_rules
    scenario = str(record.scenario or run.workload_detail.get("loadgen_scenario"))
    header = [f"# vgpu run {run.id}, instance {instance.result.name}: {run.workload}"]
    if rules:
        header.append("# under MLPerf rules (LoadGen's built-in mlperf.conf)"
                      + ("" if rules.get("compliant_settings") else
                         f"; deviations: {json.dumps(rules.get('deviations'))}"))
        kept = {"target_qps": settings.get("target_qps")}
        if not rules.get("compliant_settings"):
            kept["min_duration_ms"] = (rules.get("deviations") or {}).get("min_duration_ms")
        settings = kept
    else:
        header.append("# not under MLPerf rules: these settings replace mlperf.conf's")
    settings |= _token_conf(record)
    return "\n".join([*header, *_conf_lines(benchmark, scenario, settings)]) + "\n"


def measurements(run: Run, instance: StoredInstance) -> dict[str, Any]:
    """MLCommons measurements.json keys, then vgpu's own."""
    detail, record = run.workload_detail, _record(instance)
    precision = str(detail.get("precision") or "fp32")
    model = record.model
    return {
        "input_data_types": precision,
        "retraining": "No",
        "starting_weights_filename": model.get("path") or str(detail.get("model")),
        "weight_data_types": precision,
        "weight_transformations": "none" if detail.get("backend") != "triton"
        else "Triton model repository",
        "vgpu": {"run_id": run.id, "series_id": run.series_id,
                 "scenario_id": run.scenario_id, "workload": run.workload,
                 "instance": instance.result.name, "target_kind": run.target_kind,
                 "device": instance.result.device_note, "batch": detail.get("batch"),
                 "backend": detail.get("backend"), "variant": detail.get("variant"),
                 "validity": instance.result.validity,
                 "mlperf_rules": record.mlperf_rules,
                 "notes": detail.get("notes", []),
                 **({"token_latencies": _token_summary(dict(record.tokens))}
                    if record.tokens else {})},
    }


def _token_summary(tokens: dict[str, Any]) -> dict[str, Any]:
    """What LoadGen's logs in performance/run_1 say about tokens, by their AIPerf names."""
    keys = ("source", "output_token_throughput", "output_token_throughput_source",
            "time_to_first_token_ms", "inter_token_latency_ms", "targets_ms",
            "mlperf_targets_ms", "mlperf_names")
    return {key: tokens.get(key) for key in keys}


@dataclass(frozen=True)
class _Chosen:
    run: Run
    instance: StoredInstance
    system: str
    benchmark: str
    scenario: str


def _shared_hosts(run: Run, instances: list[StoredInstance]) -> set[str]:
    if run.target_kind == "vm":
        return set()
    hosts = Counter((i.result.platform or Platform()).host for i in instances)
    return {str(host) for host, count in hosts.items() if count > 1}


def _exportable(instance: StoredInstance) -> str | None:
    """Why this instance cannot be exported, or None."""
    if instance.result.status != "ok":
        return f"instance status {instance.result.status}"
    log_dir = Path(instance.result.log_dir or "")
    if not instance.result.log_dir or not (log_dir / SUMMARY_LOG).is_file():
        return f"no {SUMMARY_LOG} in its log folder {log_dir}"
    if _record(instance).accuracy is None:
        return ("no accuracy pass, which a submission needs for every result (give the "
                "workload an accuracy_target)")
    return None


def _choose(store: ResultStore, runs: list[Run], skipped: list[str]) -> list[_Chosen]:
    """The latest ok run per system, benchmark and scenario."""
    chosen: dict[tuple[str, str, str], _Chosen] = {}
    for run in sorted(runs, key=lambda r: r.id):
        if run.status != "ok" or run.kind != "inference":
            skipped.append(f"run {run.id}: {run.kind} run, status {run.status}")
            continue
        instances = store.instances(run.id)
        shared = _shared_hosts(run, instances)
        for instance in instances:
            why = _exportable(instance)
            if why is not None:
                skipped.append(f"run {run.id} {instance.result.name}: {why}")
                continue
            host = (instance.result.platform or Platform()).host
            system = system_name(run, instance, str(host) in shared)
            scenario = str(_record(instance).scenario
                           or run.workload_detail.get("loadgen_scenario"))
            key = (system, benchmark_name(run.workload_detail), scenario)
            if key in chosen:
                skipped.append(f"run {chosen[key].run.id} {instance.result.name}: a later "
                               f"run ({run.id}) of {'/'.join(key)} is exported")
            chosen[key] = _Chosen(run, instance, *key)
    return list(chosen.values())


def _remove_known(folder: Path, names: tuple[str, ...]) -> None:
    for name in names:
        (folder / name).unlink(missing_ok=True)


def result_readme(item: _Chosen, reasons: list[str]) -> str:
    """README.md of one benchmark/scenario: what ran, how to run it again, and whether
    the submission rules are met."""
    run, detail = item.run, item.run.workload_detail
    lines = [f"# {item.benchmark} {item.scenario} on {item.system}", "",
             f"vgpu run {run.id} (series {run.series_id}), instance "
             f"{item.instance.result.name}: {run.workload}.", "",
             f"Model {detail.get('model')} (variant {detail.get('variant') or 'full'}), "
             f"{detail.get('precision') or 'fp32'}, batch {detail.get('batch')}, backend "
             f"{detail.get('backend') or 'onnxruntime'}; device: "
             f"{item.instance.result.device_note or 'unknown'}.", "",
             "## Run it again", "", "```",
             f"vgpu bench --scenario {run.scenario_id} --workload "
             f"{detail.get('label') or detail.get('name') or run.workload} --mlperf-rules",
             "```", "", "The harness is in src/ of this submitter.", "",
             "## Submission rules (MLPerf Inference v6.1)", ""]
    lines += [f"- not submittable: {reason}" for reason in reasons] or \
        ["- met as far as vgpu checks them (run the MLCommons submission checker too)"]
    return "\n".join(lines) + "\n"


def _write_result(root: Path, item: _Chosen, division: str) -> tuple[Path, list[str]]:
    folder = root / "results" / item.system / item.benchmark / item.scenario
    log_dir = Path(item.instance.result.log_dir or "")
    accuracy = dict(_record(item.instance).accuracy or {})
    _remove_known(folder / "performance" / "run_1", PERFORMANCE_LOGS)
    _remove_known(folder / "accuracy", (*PERFORMANCE_LOGS, ACCURACY_TEXT))
    _write_performance(log_dir, folder)
    _write_accuracy(log_dir, accuracy, folder)
    (folder / "user.conf").write_text(user_conf(item.run, item.instance, item.benchmark))
    _write_json(folder / "measurements.json", measurements(item.run, item.instance))
    reasons = not_submittable(item.benchmark, item.scenario, division,
                              folder / "performance" / "run_1" / DETAIL_LOG,
                              folder / "accuracy" / DETAIL_LOG)
    (folder / README).write_text(result_readme(item, reasons))
    return folder, reasons


def _write_src(root: Path, chosen: list[_Chosen]) -> None:
    """src/: the LoadGen harness vgpu ran (its Python sources) and what each run was."""
    src = root / "src"
    harness = Path(loadgen.__file__).parent
    target = src / SRC_HARNESS
    if target.exists():
        shutil.rmtree(target)
    for path in sorted(harness.rglob("*.py")):
        dest = target / path.relative_to(harness)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
    runs = sorted({item.run.id: item.run for item in chosen}.values(), key=lambda r: r.id)
    lines = ["# Source of these results", "",
             f"Produced by vgpu {__version__}: its LoadGen harness is in {SRC_HARNESS}/ "
             "(mlcommons-loadgen, with ONNX Runtime or Triton behind it).", "",
             "| run | scenario | workload |", "|---|---|---|"]
    lines += [f"| {run.id} | {run.scenario_id} | {run.workload} |" for run in runs]
    (src / README).write_text("\n".join(lines) + "\n")


def _write_model_mapping(root: Path, chosen: list[_Chosen], division: str) -> None:
    """Open division: which benchmark a smaller variant (resnet50-tiny) stands for, in
    the submitter's model_mapping.json; an existing mapping's other entries are kept."""
    variants = {item.benchmark: mlperf_system.RULES_MODEL_IDS[benchmark]
                for item in chosen
                if (benchmark := mlperf_system.mlperf_benchmark(item.benchmark))
                != item.benchmark and benchmark in mlperf_system.RULES_MODEL_IDS}
    if division != "open" or not variants:
        return
    path = root / "model_mapping.json"
    mapping = json.loads(path.read_text()) if path.is_file() else {}
    _write_json(path, {**mapping, **variants})


def check_export_dir(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise InputError.single("command line", "--export mlperf DIR",
                                f"{out} exists and is not a folder",
                                fix="give a folder (new or one to update)")


def check_submitter(submitter: str | None, division: str) -> str:
    if not submitter or _safe(submitter) != submitter:
        raise InputError.single("command line", "--submitter",
                                "a submission names its submitter" if not submitter else
                                f"'{submitter}' is not a folder name",
                                fix="give --submitter ORG (letters, digits, '.', '_', '-')")
    if division not in DIVISIONS:
        raise InputError.single("command line", "--division",
                                f"'{division}' is not a division vgpu exports",
                                fix="use --division open or --division closed")
    return submitter


def _closed_problems(chosen: list[_Chosen]) -> list[str]:
    scenarios: dict[tuple[str, str], set[str]] = defaultdict(set)
    for item in chosen:
        scenarios[(item.system, item.benchmark)].add(item.scenario)
    problems = []
    for (system, benchmark), found in sorted(scenarios.items()):
        missing = missing_scenarios(benchmark, found)
        if missing:
            problems.append(f"{system}/{benchmark}: the closed division's edge suite also "
                            f"needs {', '.join(missing)}")
    return problems


def _write_systems(root: Path, chosen: list[_Chosen], done: MlperfExport,
                   division: str, submitter: str) -> None:
    benchmarks: dict[str, set[str]] = defaultdict(set)
    for item in chosen:
        benchmarks[item.system].add(item.benchmark)
    latest = {item.system: item for item in sorted(chosen, key=lambda c: c.run.id)}
    for system, item in latest.items():
        path = root / "systems" / f"{system}.json"
        shown = str(path.relative_to(done.root.parent.parent))
        description = mlperf_system.describe(
            system, item.run, item.instance, division=division, submitter=submitter,
            benchmarks=benchmarks[system], system_file=shown)
        description = mlperf_system.keep_user_values(description, path)
        _write_json(path, description)
        done.systems.append(path)
        unknown = mlperf_system.unknown_keys(description)
        if unknown:
            done.unknown_keys[shown] = unknown


def export_mlperf(store: ResultStore, runs: list[Run], out: Path, *, submitter: str,
                  division: str = "open") -> MlperfExport:
    """Write ``runs`` (their ok inference instances with an accuracy pass) into ``out`` as
    the submission tree of ``submitter`` in ``division``; what was written, what was left
    out and why, and why what was written is not (yet) submittable."""
    check_export_dir(out)
    check_submitter(submitter, division)
    root = out / division / submitter
    done = MlperfExport(root=root)
    chosen = _choose(store, runs, done.skipped)
    if not chosen:
        raise InputError.single("command line", "--export mlperf",
                                "none of the selected runs has an ok inference instance "
                                "with LoadGen logs and an accuracy pass"
                                + (f" ({'; '.join(done.skipped[:3])})" if done.skipped else ""),
                                fix="see `vgpu results` and pick ok runs (--scenario)")
    for item in chosen:
        folder, reasons = _write_result(root, item, division)
        done.results.append(ExportedResult(item.run.id, item.instance.result.name, folder,
                                           tuple(reasons)))
    _write_systems(root, chosen, done, division, submitter)
    _write_src(root, chosen)
    _write_model_mapping(root, chosen, division)
    if division == "closed":
        done.problems += _closed_problems(chosen)
    return done

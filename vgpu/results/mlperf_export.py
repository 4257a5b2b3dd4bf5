"""Stored runs in the MLCommons inference results layout, as a submission tree lays them
out::

    DIR/systems/<system>.json
    DIR/results/<system>/<benchmark>/<scenario>/performance/run_1/mlperf_log_*.{txt,json}
    DIR/results/<system>/<benchmark>/<scenario>/accuracy/   (a run with an accuracy pass)
    DIR/results/<system>/<benchmark>/<scenario>/user.conf, measurements.json

A system is one VM, or one bare-metal host (one per harness instance when a host ran
several, e.g. MIG tenants). Per system, benchmark and scenario the latest ok run is
exported; the LoadGen logs are copied byte for byte. Only the files of this layout are
written: re-exporting replaces them, anything else in DIR is left alone."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vgpu.errors import InputError
from vgpu.results.records import Platform, Run, StoredInstance
from vgpu.results.store import ResultStore

SUMMARY_LOG = "mlperf_log_summary.txt"
DETAIL_LOG = "mlperf_log_detail.txt"
ACCURACY_LOG = "mlperf_log_accuracy.json"
PERFORMANCE_LOGS = (SUMMARY_LOG, DETAIL_LOG, ACCURACY_LOG)
ACCURACY_PASS_DIR = "accuracy"  # where the harness keeps the accuracy pass's LoadGen logs
EMPTY_ACCURACY_LOG = "[\n]\n"  # what LoadGen writes in PerformanceOnly mode
FULL_VARIANTS = (None, "full", "large")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class ExportedResult:
    run_id: int
    instance: str
    folder: Path


@dataclass
class MlperfExport:
    results: list[ExportedResult] = field(default_factory=list)
    systems: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # run/instance and why


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
    if model == "bert":
        target = (detail.get("accuracy") or {}).get("target")
        name = "bert-99.9" if target is not None and target >= 0.999 else "bert-99"
    variant = detail.get("variant")
    return name if variant in FULL_VARIANTS else f"{name}-{_safe(str(variant))}"


def system_name(run: Run, instance: StoredInstance, shared_host: bool) -> str:
    """A VM is its own system; a bare-metal host is one, split per instance when the run
    had several instances on it."""
    platform = instance.result.platform or Platform()
    if run.target_kind == "vm":
        return _safe(instance.result.name)
    host = _safe(platform.host or "localhost")
    return f"{host}_{_safe(instance.result.name)}" if shared_host else host


def _record(instance: StoredInstance) -> dict[str, Any]:
    return instance.result.result or {}


def _copy_logs(source: Path, names: tuple[str, ...], target: Path) -> list[str]:
    target.mkdir(parents=True, exist_ok=True)
    copied = []
    for name in names:
        if (source / name).is_file():
            shutil.copyfile(source / name, target / name)
            copied.append(name)
    return copied


def _write_performance(log_dir: Path, has_accuracy_pass: bool, folder: Path) -> None:
    run_1 = folder / "performance" / "run_1"
    if has_accuracy_pass:
        # log_dir's accuracy log is the accuracy pass's; the timed run logged none.
        _copy_logs(log_dir, (SUMMARY_LOG, DETAIL_LOG), run_1)
        (run_1 / ACCURACY_LOG).write_text(EMPTY_ACCURACY_LOG)
    else:
        _copy_logs(log_dir, PERFORMANCE_LOGS, run_1)


def _accuracy_text(accuracy: dict[str, Any]) -> str:
    lines = [f"{accuracy.get('metric')}: {accuracy.get('value')}"]
    for key in ("target", "threshold", "samples", "passed", "labels_from"):
        lines.append(f"{key}: {accuracy.get(key)}")
    return "\n".join(lines) + "\n"


def _write_accuracy(log_dir: Path, accuracy: dict[str, Any], folder: Path) -> None:
    target = folder / "accuracy"
    _copy_logs(log_dir / ACCURACY_PASS_DIR, (SUMMARY_LOG, DETAIL_LOG), target)
    _copy_logs(log_dir, (ACCURACY_LOG,), target)
    (target / "accuracy.txt").write_text(_accuracy_text(accuracy))


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")


def _conf_lines(benchmark: str, scenario: str, settings: dict[str, Any]) -> list[str]:
    prefix = f"{benchmark}.{scenario}"
    wanted = {"target_qps": settings.get("target_qps"),
              "target_latency": _ns_to_ms(settings.get("target_latency_ns")),
              "min_duration": settings.get("min_duration_ms"),
              "min_query_count": settings.get("min_query_count"),
              "performance_sample_count_override": settings.get("performance_sample_count"),
              "samples_per_query": settings.get("samples_per_query")
              if scenario == "MultiStream" else None}
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
    settings = dict(record.get("settings") or {})
    rules = record.get("mlperf_rules")
    scenario = str(record.get("scenario") or run.workload_detail.get("loadgen_scenario"))
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
    return "\n".join([*header, *_conf_lines(benchmark, scenario, settings)]) + "\n"


def measurements(run: Run, instance: StoredInstance) -> dict[str, Any]:
    """MLCommons measurements.json keys, then vgpu's own."""
    detail, record = run.workload_detail, _record(instance)
    precision = str(detail.get("precision") or "fp32")
    model = record.get("model") or {}
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
                 "mlperf_rules": record.get("mlperf_rules"),
                 "notes": detail.get("notes", [])},
    }


def system_description(name: str, run: Run, instance: StoredInstance) -> dict[str, Any]:
    """MLCommons system description keys from the platform record and result.json, then
    vgpu's own (hypervisor, vGPU / MIG profile, drivers)."""
    platform = instance.result.platform or Platform()
    record = _record(instance)
    host_info = ((record.get("telemetry") or {}).get("host")) or {}
    software = record.get("software") or {}
    ort = software.get("onnxruntime") or {}
    device = record.get("device") or {}
    accelerator = device.get("gpu_name") or platform.gpu
    on_gpu = instance.result.device_kind not in (None, "cpu")
    return {
        "division": "open", "submitter": "", "status": "RDI",
        "system_name": name, "system_type": "datacenter",
        "number_of_nodes": 1,
        "host_processors_per_node": 1,
        "host_processor_model_name": host_info.get("cpu_model") or "",
        "host_processor_core_count": platform.vcpus or host_info.get("cpu_count") or "",
        "host_processor_vcpu_count": platform.vcpus or host_info.get("cpu_count") or "",
        "host_memory_capacity": "" if platform.memory_gb is None
        else f"{platform.memory_gb:g} GB",
        "accelerators_per_node": 1 if on_gpu else 0,
        "accelerator_model_name": accelerator if on_gpu else "",
        "accelerator_memory_capacity": _slice_memory(platform) if on_gpu else "",
        "framework": _framework(ort, software, platform),
        "operating_system": software.get("os") or "",
        "other_software_stack": _software_stack(platform, software),
        "sw_notes": instance.result.device_note or "",
        "hw_notes": _hw_notes(run, platform),
        "vgpu": _vgpu_extras(run, instance, platform),
    }


def _slice_memory(platform: Platform) -> str:
    """The memory the instance had: a MIG profile names it (1g.10gb -> 10 GB)."""
    found = re.search(r"(\d+)gb", platform.mig_profile or platform.vgpu_profile or "")
    return f"{found.group(1)} GB" if found else ""


def _framework(ort: dict[str, Any], software: dict[str, Any], platform: Platform) -> str:
    package = platform.ort_package or ort.get("package") or "onnxruntime"
    version = platform.ort_version or ort.get("version") or ""
    loadgen = software.get("mlcommons-loadgen")
    text = f"{package} {version}".strip()
    return f"{text}, mlcommons-loadgen {loadgen}" if loadgen else text


def _software_stack(platform: Platform, software: dict[str, Any]) -> str:
    parts = [("vgpu harness", platform.harness_version or software.get("harness")),
             ("guest driver", platform.guest_driver), ("CUDA", platform.cuda_version),
             ("cuDNN", platform.cudnn_version), ("TensorRT", platform.tensorrt_version),
             ("execution provider", platform.execution_provider),
             ("Python", software.get("python")), ("runtime", platform.runtime),
             ("container image", platform.container_image)]
    return ", ".join(f"{label} {value}" for label, value in parts if value)


def _hw_notes(run: Run, platform: Platform) -> str:
    if run.target_kind != "vm":
        return "bare metal"
    return (f"VM on ESXi {platform.esxi_version or '?'} build {platform.esxi_build or '?'}, "
            f"{platform.attachment or 'vgpu'} {platform.vgpu_profile or ''}").strip()


def _vgpu_extras(run: Run, instance: StoredInstance, platform: Platform) -> dict[str, Any]:
    return {"target_kind": run.target_kind, "instance": instance.result.name,
            "host": platform.host,
            "hypervisor": "VMware ESXi" if run.target_kind == "vm" else None,
            "esxi_version": platform.esxi_version, "esxi_build": platform.esxi_build,
            "host_driver": platform.host_driver, "guest_driver": platform.guest_driver,
            "vgpu_profile": platform.vgpu_profile, "mig_profile": platform.mig_profile,
            "attachment": platform.attachment, "vm_hardware_version":
            platform.vm_hardware_version, "firmware": platform.firmware}


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
            scenario = str(_record(instance).get("scenario")
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


def _write_result(out: Path, item: _Chosen) -> Path:
    folder = out / "results" / item.system / item.benchmark / item.scenario
    log_dir = Path(item.instance.result.log_dir or "")
    accuracy = _record(item.instance).get("accuracy")
    _remove_known(folder / "performance" / "run_1", PERFORMANCE_LOGS)
    _remove_known(folder / "accuracy", (*PERFORMANCE_LOGS, "accuracy.txt"))
    _write_performance(log_dir, accuracy is not None, folder)
    if accuracy is not None:
        _write_accuracy(log_dir, accuracy, folder)
    (folder / "user.conf").write_text(user_conf(item.run, item.instance, item.benchmark))
    _write_json(folder / "measurements.json", measurements(item.run, item.instance))
    return folder


def check_export_dir(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise InputError.single("command line", "--export mlperf DIR",
                                f"{out} exists and is not a folder",
                                fix="give a folder (new or one to update)")


def export_mlperf(store: ResultStore, runs: list[Run], out: Path) -> MlperfExport:
    """Write ``runs`` (their ok inference instances) into ``out`` in the MLCommons
    results layout; what was written and what was left out, with why."""
    check_export_dir(out)
    done = MlperfExport()
    chosen = _choose(store, runs, done.skipped)
    if not chosen:
        raise InputError.single("command line", "--export mlperf",
                                "none of the selected runs has an ok inference instance "
                                "with LoadGen logs" + (f" ({'; '.join(done.skipped[:3])})"
                                                       if done.skipped else ""),
                                fix="see `vgpu results` and pick ok runs (--scenario)")
    for item in chosen:
        folder = _write_result(out, item)
        done.results.append(ExportedResult(item.run.id, item.instance.result.name, folder))
        system_file = out / "systems" / f"{item.system}.json"
        _write_json(system_file, system_description(item.system, item.run, item.instance))
        if system_file not in done.systems:
            done.systems.append(system_file)
    return done

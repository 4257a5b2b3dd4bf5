"""The MLCommons system description (``<division>/<submitter>/systems/<system>.json``) of an
exported system: every key the submission rules require, filled from vgpu's platform
record, or marked as unknown to vgpu with where the user sets it. A value the user wrote
over such a mark in an earlier export is kept when the tree is exported again."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from vgpu.results.store.records import Platform, Run, StoredInstance

UNKNOWN_PREFIX = "unknown to vgpu"

# Every key of a system description the v6.1 submission rules require.
REQUIRED_KEYS = (
    "division", "submitter", "status", "system_name", "number_of_nodes",
    "host_processor_model_name", "host_processors_per_node", "host_processor_core_count",
    "host_memory_capacity", "host_storage_capacity", "host_storage_type",
    "accelerators_per_node", "accelerator_model_name", "accelerator_memory_capacity",
    "framework", "operating_system", "system_type", "other_software_stack",
    "host_processor_frequency", "host_processor_caches", "host_memory_configuration",
    "host_processor_interconnect", "host_networking", "host_networking_topology",
    "accelerator_frequency", "accelerator_host_interconnect", "accelerator_interconnect",
    "accelerator_interconnect_topology", "accelerator_memory_configuration",
    "accelerator_on-chip_memories", "cooling", "hw_notes", "sw_notes",
    "host_network_card_count", "system_type_detail",
)

# The suite each benchmark vgpu runs belongs to in v6.1: ResNet50 and BERT are only in
# the edge suite (a datacenter system with them is not a valid submission).
BENCHMARK_SUITES = {"resnet50": "edge", "bert-99": "edge", "bert-99.9": "edge"}
VALID_STATUSES = ("available", "preview", "rdi")
# The model identifiers of the v6.1 rules (resnet50's is "resnet"): what an open
# submitter's model_mapping.json maps a variant to.
RULES_MODEL_IDS = {"resnet50": "resnet", "bert-99": "bert-99", "bert-99.9": "bert-99.9"}
# The rules want a non-empty answer: a CPU-only system has "0" accelerators, as text.
NO_ACCELERATOR = "0"


def unknown(system_file: str) -> str:
    return f"{UNKNOWN_PREFIX}: set it in {system_file} (kept when exported again)"


def is_unknown(value: object) -> bool:
    return isinstance(value, str) and value.startswith(UNKNOWN_PREFIX)


def system_type(benchmarks: Iterable[str]) -> str:
    """``edge``, ``datacenter`` or ``datacenter,edge``: the suites the system's benchmarks
    belong to (by their MLCommons benchmark, a variant counting as its benchmark)."""
    suites = {BENCHMARK_SUITES.get(mlperf_benchmark(b), "datacenter") for b in benchmarks}
    return ",".join(sorted(suites)) or "edge"


def mlperf_benchmark(benchmark: str) -> str:
    """The MLCommons benchmark a folder name stands for (resnet50-tiny -> resnet50)."""
    for name in sorted(BENCHMARK_SUITES, key=len, reverse=True):
        if benchmark == name or benchmark.startswith(f"{name}-"):
            return name
    return benchmark


def describe(name: str, run: Run, instance: StoredInstance, *, division: str,
             submitter: str, benchmarks: Iterable[str], system_file: str) -> dict[str, Any]:
    """The system description of ``name``: the required keys, then vgpu's own."""
    platform = instance.result.platform or Platform()
    result = instance.result.run_result
    host_info, software = result.host_facts, result.software_stack
    on_gpu = instance.result.device_kind not in (None, "cpu")
    mark = unknown(system_file)
    known: dict[str, Any] = {
        "division": division, "submitter": submitter, "status": "RDI",
        "system_name": name, "system_type": system_type(benchmarks),
        "number_of_nodes": 1,
        "host_processor_model_name": host_info.get("cpu_model"),
        "host_processors_per_node": host_info.get("sockets"),
        "host_processor_core_count": platform.vcpus or host_info.get("cpu_count"),
        "host_memory_capacity": None if platform.memory_gb is None
        else f"{platform.memory_gb:g} GB",
        "accelerators_per_node": 1 if on_gpu else NO_ACCELERATOR,
        "accelerator_model_name": result.device.gpu_name
        or platform.gpu if on_gpu else "none (CPU run)",
        "accelerator_memory_capacity": _slice_memory(platform) if on_gpu else "none",
        "accelerator_frequency": None if on_gpu else "none",
        "accelerator_host_interconnect": None if on_gpu else "none",
        "accelerator_interconnect": None if on_gpu else "none",
        "accelerator_interconnect_topology": None if on_gpu else "none",
        "accelerator_memory_configuration": None if on_gpu else "none",
        "accelerator_on-chip_memories": None if on_gpu else "none",
        "framework": _framework(software, platform),
        "operating_system": software.get("os") or host_info.get("os"),
        "other_software_stack": _software_stack(platform, software) or None,
        "sw_notes": instance.result.device_note or "",
        "hw_notes": _hw_notes(run, platform),
        "system_type_detail": "virtual machine on VMware ESXi" if run.target_kind == "vm"
        else "bare metal",
    }
    description = {key: mark if known.get(key) in (None, "") and key not in ("sw_notes",)
                   else known.get(key) for key in REQUIRED_KEYS}
    description["vgpu"] = _vgpu_extras(run, instance, platform)
    return description


def unknown_keys(description: dict[str, Any]) -> list[str]:
    return [key for key in REQUIRED_KEYS if is_unknown(description.get(key))]


def keep_user_values(description: dict[str, Any], path: Path) -> dict[str, Any]:
    """Keys vgpu does not know that the user already filled in ``path`` keep the user's
    value; everything vgpu knows is written again."""
    if not path.is_file():
        return description
    try:
        earlier = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return description
    if not isinstance(earlier, dict):
        return description
    kept = dict(description)
    for key in REQUIRED_KEYS:
        value = earlier.get(key)
        if is_unknown(kept[key]) and value not in (None, "") and not is_unknown(value):
            kept[key] = value
    if isinstance(earlier.get("status"), str) and \
            earlier["status"].lower() in VALID_STATUSES:
        kept["status"] = earlier["status"]  # a release state only the submitter knows
    return kept


def _slice_memory(platform: Platform) -> str | None:
    """The memory the instance had: a MIG profile names it (1g.10gb -> 10 GB)."""
    found = re.search(r"(\d+)gb", platform.mig_profile or platform.vgpu_profile or "")
    return f"{found.group(1)} GB" if found else None


def _framework(software: Mapping[str, Any], platform: Platform) -> str:
    ort = software.get("onnxruntime") or {}
    package = platform.ort_package or ort.get("package") or "onnxruntime"
    version = platform.ort_version or ort.get("version") or ""
    loadgen = software.get("mlcommons-loadgen")
    text = f"{package} {version}".strip()
    return f"{text}, mlcommons-loadgen {loadgen}" if loadgen else text


def _software_stack(platform: Platform, software: Mapping[str, Any]) -> str:
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

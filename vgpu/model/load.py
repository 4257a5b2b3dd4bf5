"""Load and fully check scenario and inventory files. Every problem found is reported at
once, each naming file, line, field and fix; the caller gets valid models or an
InputError (exit code 2)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from vgpu import mig
from vgpu.errors import InputError, Problem
from vgpu.mig import migparted
from vgpu.mig.migparted import GpuLayout
from vgpu.model.base import validate_doc
from vgpu.model.inventory import Inventory
from vgpu.model.names import NAME_FIX, name_problem
from vgpu.model.scenario import InferenceWorkload, Scenario, TrainingWorkload
from vgpu.model.vgpu_request import VgpuRequest, parse_vgpu
from vgpu.model.yamlsource import Loc, SourceDoc, format_loc, load_yaml


def _problem(doc: SourceDoc, loc: Loc, message: str, fix: str | None = None) -> Problem:
    return Problem(doc.path, format_loc(loc), message, line=doc.line_of(loc), fix=fix)


def check_scenario(scenario: Scenario, doc: SourceDoc) -> list[Problem]:
    """Rules that need more than one field at a time."""
    problems = _vgpu_problems(scenario, doc) + _vm_name_problems(scenario, doc)
    names = scenario.vm_names()
    for name in _repeated(names):
        problems.append(_problem(doc, ("vms",), f"VM name '{name}' is used twice",
                                 fix="give each VM group a distinct name pattern"))
    return problems + _workload_problems(scenario, doc, len(names)) + \
        _llm_memory_problems(scenario, doc)


def _llm_memory_problems(scenario: Scenario, doc: SourceDoc) -> list[Problem]:
    """An LLM workload whose weights and KV cache do not fit a VM's device."""
    from vgpu.model import llm_memory

    problems: list[Problem] = []
    devices = llm_memory.vm_framebuffers(scenario)
    for k, workload in enumerate(scenario.workloads):
        if not isinstance(workload, InferenceWorkload):
            continue
        est = llm_memory.workload_estimate(workload)
        for _, vm, device, gb in devices if est is not None else []:
            assert est is not None
            if not est.fits(gb):
                message, fix = llm_memory.refusal(workload, est, vm, device, gb)
                field = "variant" if workload.variant is not None else "model"
                problems.append(_problem(doc, ("workloads", k, field), message, fix=fix))
    return problems


def _repeated(values: list[str]) -> list[str]:
    return sorted(value for value, n in Counter(values).items() if n > 1)


def _vgpu_problems(scenario: Scenario, doc: SourceDoc) -> list[Problem]:
    problems: list[Problem] = []
    gpu = scenario.gpu_model
    for i, spec in enumerate(scenario.vms):
        kinds: set[str] = set()
        for j, text in enumerate(spec.vgpus):
            try:
                kinds.add(parse_vgpu(text, gpu).kind)
            except mig.ProfileParseError as exc:
                problems.append(_problem(doc, ("vms", i, "vgpus", j), str(exc),
                                         fix="use one of the valid names"))
        if len(kinds) > 1:
            problems.append(_problem(doc, ("vms", i, "vgpus"),
                                     f"mixes {' and '.join(sorted(kinds))} vGPUs in one VM",
                                     fix="all vGPUs of a VM must be of one kind"))
        if scenario.platform == "bare-metal" and len(spec.vgpus) != 1:
            problems.append(_problem(doc, ("vms", i, "vgpus"),
                                     "a bare-metal instance uses exactly one MIG device or GPU",
                                     fix="list one vGPU per instance"))
    return problems


def _vm_name_problems(scenario: Scenario, doc: SourceDoc) -> list[Problem]:
    """Each group's expanded names (a pattern is checked with n=1 when it is read)."""
    problems: list[Problem] = []
    for i, spec in enumerate(scenario.vms):
        for name in spec.names():
            reason = name_problem(name)
            if reason is not None:
                problems.append(_problem(doc, ("vms", i, "name"),
                                         f"VM name '{name}' (from '{spec.name}') {reason}",
                                         fix=NAME_FIX))
                break
    return problems


def _workload_problems(scenario: Scenario, doc: SourceDoc, vm_count: int) -> list[Problem]:
    problems: list[Problem] = []
    for k, workload in enumerate(scenario.workloads):
        if isinstance(workload, TrainingWorkload) and workload.nodes > vm_count:
            problems.append(_problem(
                doc, ("workloads", k, "nodes"),
                f"{workload.nodes} nodes but the scenario has {vm_count} VM(s)",
                fix="one VM (or bare-metal instance) per node: add VMs or lower 'nodes'"))
        if isinstance(workload, InferenceWorkload) and workload.model.endswith(".onnx"):
            path = Path(workload.model)
            if not path.is_absolute():
                path = Path(doc.path).parent / path
            if not path.exists():
                problems.append(_problem(doc, ("workloads", k, "model"),
                                         f"model file {workload.model} does not exist",
                                         fix="give a path relative to the scenario file"))
    for label in _repeated([w.label for w in scenario.workloads]):
        problems.append(_problem(doc, ("workloads",), f"two workloads are both named '{label}'",
                                 fix="set 'name' on one of them"))
    return problems


def load_scenario(path: str | Path) -> Scenario:
    doc = load_yaml(path)
    expand_mig_parted(doc)
    scenario = validate_doc(Scenario, doc)
    problems = check_scenario(scenario, doc)
    if problems:
        raise InputError(problems)
    scenario.source = str(path)
    return scenario


def load_inventory(path: str | Path) -> Inventory:
    doc = load_yaml(path)
    inventory = validate_doc(Inventory, doc)
    inventory.source = str(path)
    return inventory


def vgpu_requests(scenario: Scenario) -> dict[str, list[VgpuRequest]]:
    """VM name -> its parsed vGPU requests (the scenario is already checked)."""
    gpu = scenario.gpu_model
    return {name: [parse_vgpu(t, gpu) for t in spec.vgpus]
            for spec in scenario.vms for name in spec.names()}


# --- NVIDIA mig-parted configs as a scenario's input -------------------------------------

PASSTHROUGH = "passthrough"  # the vGPU label of a whole GPU on bare metal


def read_config(path: Path, config: str, gpu: mig.GpuModel, *,
                gpus_for_all: int = 1) -> list[GpuLayout]:
    """The per-GPU layouts of config ``config`` in mig-parted file ``path`` (``devices:
    all`` stands for GPUs 0..gpus_for_all-1). InputError naming file, line, field and fix."""
    doc = load_yaml(path)
    layouts, problems = migparted.read_layouts(doc.data, config, gpu,
                                               gpus_for_all=gpus_for_all)
    if problems:
        raise InputError([_problem(doc, p.where, p.message, fix=p.fix) for p in problems])
    return layouts


def _instance_name(scenario_id: str, label: str) -> str:
    return f"{scenario_id}-{label.replace('+', '-')}-{{n}}"


def vm_groups(scenario_id: str, layouts: list[GpuLayout]) -> list[dict[str, Any]]:
    """Scenario ``vms`` entries for the layouts: one harness instance per MIG device or
    whole GPU, grouped by profile, largest first."""
    counts: Counter[str] = Counter()
    for layout in layouts:
        counts.update(layout.profiles if layout.mig_enabled else (PASSTHROUGH,))
    return [{"name": _instance_name(scenario_id, label), "count": n, "vgpus": [label]}
            for label, n in counts.items()]


def expand_mig_parted(doc: SourceDoc) -> None:
    """A bare-metal scenario naming ``mig_parted: {file, config}`` gets its ``vms`` from
    that config (one instance per MIG device or whole GPU) before it is validated. A
    malformed ``mig_parted`` itself is left to the scenario model to report."""
    data = doc.data
    ref = data.get("mig_parted") if isinstance(data, dict) else None
    if not isinstance(ref, dict) or not isinstance(ref.get("file"), str) \
            or not isinstance(ref.get("config"), str):
        return
    problem = _mig_parted_problem(doc, data)
    if problem is not None:
        raise InputError([problem])
    try:
        gpu = mig.gpu_model(str(data.get("gpu")))
    except KeyError:
        return  # the model names the valid GPUs
    path = Path(ref["file"]).expanduser()
    path = path if path.is_absolute() else Path(doc.path).parent / path
    if not path.is_file():
        raise InputError([Problem(doc.path, "mig_parted.file", f"{ref['file']} does not exist",
                                  line=doc.line_of(("mig_parted", "file")),
                                  fix="give the mig-parted file's path relative to the "
                                      "scenario file")])
    gpus = ref.get("gpus", 1)
    layouts = read_config(path, ref["config"], gpu,
                          gpus_for_all=gpus if isinstance(gpus, int) and gpus > 0 else 1)
    data["vms"] = vm_groups(str(data.get("id", "mig")), layouts)


def _mig_parted_problem(doc: SourceDoc, data: dict[str, Any]) -> Problem | None:
    if "vms" in data:
        return Problem(doc.path, "mig_parted", "both 'vms' and 'mig_parted' are given",
                       line=doc.line_of(("mig_parted",)),
                       fix="keep one: mig_parted names the instances through its config")
    if data.get("platform") != "bare-metal":
        return Problem(doc.path, "mig_parted", "mig_parted describes a bare-metal host's "
                       "GPUs", line=doc.line_of(("mig_parted",)),
                       fix="set platform: bare-metal, or list vms with their vGPUs")
    return None

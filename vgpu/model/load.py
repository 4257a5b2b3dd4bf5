"""Load and fully check scenario and inventory files. Every problem found is reported at
once, each naming file, line, field and fix; the caller gets valid models or an
InputError (exit code 2)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from vgpu import mig
from vgpu.errors import InputError, Problem
from vgpu.model import migparted
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
    migparted.expand_scenario(doc)
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

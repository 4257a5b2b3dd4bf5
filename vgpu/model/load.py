"""Load and fully check scenario and inventory files. Every problem found is reported at
once, each naming file, line, field and fix; the caller gets valid models or an
InputError (exit code 2)."""

from __future__ import annotations

from pathlib import Path

from vgpu import mig
from vgpu.errors import InputError, Problem
from vgpu.model.base import validate_doc
from vgpu.model.inventory import Inventory
from vgpu.model.scenario import InferenceWorkload, Scenario, TrainingWorkload
from vgpu.model.vgpu_request import VgpuRequest, parse_vgpu
from vgpu.model.yamlsource import Loc, SourceDoc, format_loc, load_yaml


def _problem(doc: SourceDoc, loc: Loc, message: str, fix: str | None = None) -> Problem:
    return Problem(doc.path, format_loc(loc), message, line=doc.line_of(loc), fix=fix)


def check_scenario(scenario: Scenario, doc: SourceDoc) -> list[Problem]:
    """Rules that need more than one field at a time."""
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
    names = scenario.vm_names()
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(_problem(doc, ("vms",), f"VM name '{name}' is used twice",
                                 fix="give each VM group a distinct name pattern"))
    for k, workload in enumerate(scenario.workloads):
        if isinstance(workload, TrainingWorkload) and workload.nodes > len(names):
            problems.append(_problem(
                doc, ("workloads", k, "nodes"),
                f"{workload.nodes} nodes but the scenario has {len(names)} VM(s)",
                fix="one VM (or bare-metal instance) per node: add VMs or lower 'nodes'"))
        if isinstance(workload, InferenceWorkload) and workload.model.endswith(".onnx"):
            path = Path(workload.model)
            if not path.is_absolute():
                path = Path(doc.path).parent / path
            if not path.exists():
                problems.append(_problem(doc, ("workloads", k, "model"),
                                         f"model file {workload.model} does not exist",
                                         fix="give a path relative to the scenario file"))
    labels = [w.label for w in scenario.workloads]
    for label in sorted({x for x in labels if labels.count(x) > 1}):
        problems.append(_problem(doc, ("workloads",), f"two workloads are both named '{label}'",
                                 fix="set 'name' on one of them"))
    return problems


def load_scenario(path: str | Path) -> Scenario:
    doc = load_yaml(path)
    scenario = validate_doc(Scenario, doc)
    problems = check_scenario(scenario, doc)
    if problems:
        raise InputError(problems)
    scenario.source = str(path)
    return scenario


def load_inventory(path: str | Path) -> Inventory:
    doc = load_yaml(path)
    return validate_doc(Inventory, doc)


def vgpu_requests(scenario: Scenario) -> dict[str, list[VgpuRequest]]:
    """VM name -> its parsed vGPU requests (the scenario is already checked)."""
    gpu = scenario.gpu_model
    return {name: [parse_vgpu(t, gpu) for t in spec.vgpus]
            for spec in scenario.vms for name in spec.names()}

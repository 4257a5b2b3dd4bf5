"""Bare-metal scenario -> the MIG layout of each local GPU, through the planner, so bare
metal gets exactly the slices (profiles and starts) the VMs of the vSphere scenario had;
and a plan's GPUs as the layouts of a mig-parted config."""

from __future__ import annotations

from vgpu.errors import InputError, ParameterError
from vgpu.mig.migparted import GpuLayout
from vgpu.model.plan import Plan, PlannedGpu
from vgpu.nvml.errors import GPU_INDEX, PLAN_HOST, TOO_FEW_GPUS
from vgpu.nvml.spec import LayoutSpec, SliceSpec


def layouts_from_plan(plan: Plan, gpus: list[int] | None = None,
                      host: str | None = None) -> list[LayoutSpec]:
    """One LayoutSpec per MIG GPU of ``host`` (default: the plan's only host). The k-th
    planned GPU goes to local GPU ``gpus[k]`` (default: the planned index)."""
    source = plan.scenario_file or f"scenario {plan.scenario_id}"
    if plan.platform != "bare-metal":
        raise InputError.single(source, "platform",
                                f"scenario {plan.scenario_id} is a vSphere scenario; MIG "
                                "layouts on this machine come from bare-metal scenarios",
                                fix=f"use its bare-metal counterpart (e.g. --scenario "
                                    f"bm{plan.scenario_id}; see `vgpu scenarios`)")
    hosts = sorted({g.host for g in plan.gpus if g.mode == "mig"})
    if host is None and len(hosts) > 1:
        raise InputError.single(source, "vms", f"the plan puts MIG slices on {len(hosts)} "
                                f"hosts ({', '.join(hosts)})",
                                fix="apply it on each host, naming the host")
    if host is not None and host not in plan.hosts:
        raise ParameterError(PLAN_HOST, f"the plan has no host '{host}'",
                             f"use one of {', '.join(plan.hosts)}")
    wanted = host or (hosts[0] if hosts else None)
    planned = [g for g in plan.gpus if g.mode == "mig" and g.host == wanted]
    if not planned:
        raise InputError.single(source, "vms", "the scenario asks for no MIG slices",
                                fix="give the instances MIG profiles, e.g. vgpus: [1g.10gb]")
    if gpus is not None and len(gpus) < len(planned):
        raise ParameterError(GPU_INDEX, f"the plan needs {len(planned)} GPUs, {len(gpus)} "
                             "given", f"give {len(planned)} GPU indexes", reason=TOO_FEW_GPUS,
                             details={"needed": len(planned)})
    out = []
    for k, g in enumerate(planned):
        slices = tuple(SliceSpec(s.profile, s.start, s.owner) for s in g.slices
                       if not s.foreign)
        out.append(LayoutSpec(gpu=gpus[k] if gpus is not None else g.index, model=g.model,
                              slices=slices, scenario=plan.scenario_id))
    return out


def gpu_layouts_by_host(plan: Plan) -> dict[str, list[GpuLayout]]:
    """Host -> the layouts of its GPUs that the plan uses (MIG or whole), as a mig-parted
    config names them."""
    out: dict[str, list[GpuLayout]] = {}
    for g in plan.gpus:
        layout = _gpu_layout(g)
        if layout is not None:
            out.setdefault(g.host, []).append(layout)
    return out


def _gpu_layout(g: PlannedGpu) -> GpuLayout | None:
    if g.mode == "mig":
        return GpuLayout(g.index, True, tuple(s.profile for s in g.slices if not s.foreign))
    if g.mode == "passthrough":
        return GpuLayout(g.index, False)
    return None

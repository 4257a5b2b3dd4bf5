"""The GPU assignment policy a plan needs (pure: no vCenter).

ESXi picks a vGPU VM's GPU at power-on by the host's
``HostGraphicsConfig.sharedPassthruAssignmentPolicy``: ``performance`` (the default) takes
the GPU with the fewest VMs, so VMs a plan puts on one GPU are spread; ``consolidation``
fills a GPU first. A plan that shares a GPU needs consolidation on that host."""

from __future__ import annotations

from vgpu.model.plan import Plan

CONSOLIDATION = "consolidation"
PERFORMANCE = "performance"
ESXCLI_CONSOLIDATION = ("esxcli graphics host set --shared-passthru-assignment-policy "
                        "Consolidation")


def shared_gpus(plan: Plan) -> dict[str, list[str]]:
    """Host -> the plan's GPUs there that hold more than one VM (the plan's own VMs and
    VMs already there), as ``GPU <index> (<vm>, ...)``."""
    out: dict[str, list[str]] = {}
    for gpu in plan.gpus:
        if gpu.mode in {"unused", "passthrough"} or not gpu.tenants:
            continue
        held = sorted({s.owner for s in gpu.slices if s.foreign})
        occupants = [*gpu.tenants, *held]
        if len(occupants) > 1:
            out.setdefault(gpu.host, []).append(f"GPU {gpu.index} ({', '.join(occupants)})")
    return out


def policy_lines(plan: Plan) -> list[str]:
    """What the plan needs of each host's assignment policy, for `vgpu plan`."""
    shared = shared_gpus(plan)
    if not shared:
        return ["GPU assignment policy: any (no GPU holds more than one VM of the plan)"]
    return [f"GPU assignment policy on {host}: {CONSOLIDATION} (the plan shares "
            f"{', '.join(gpus)}; `vgpu apply` sets it, ESXi's default {PERFORMANCE} would "
            "spread these VMs)" for host, gpus in sorted(shared.items())]

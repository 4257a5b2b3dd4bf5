"""Xorg on an ESXi host. The host's graphics settings (the GPU assignment policy, the default
and per-GPU graphics type) take effect only when the X.Org server restarts or the host
boots. Only vSGA (graphics type shared) needs Xorg running: GPUs in Shared Direct (vGPU)
mode need none since vSphere 7.0 U1, and on compute GPUs (A100, H100) Xorg often does not
start; there a setting waits for the next boot. vgpu restarts it through the host's
HostServiceSystem (``RestartService('xorg')``) where a setting is configured but not in
effect, and only while no vGPU VM runs on the host: a restart under running vGPU VMs is
refused before anything changes.

What is in effect is read where vSphere says it: each GPU's ``graphicsInfo[].graphicsType``
(the active type) against ``graphicsConfig`` (its configured type, else the host default).
The assignment policy in effect is not reported: a policy set since Xorg last started (by
apply, or during an upgrade window without a boot) is known from the change itself."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyVmomi import vmodl

from vgpu.errors import RemoteError
from vgpu.vsphere.plan.gpustack import needs_xorg
from vgpu.vsphere.read.facts import HostFacts

XORG = "xorg"
ON_HOST_RESTART = "/etc/init.d/xorg restart"
ON_HOST_START = "/etc/init.d/xorg start"


class XorgBlocked(RemoteError):
    """Xorg must restart on a host where vGPU VMs run; nothing was changed."""

    def __init__(self, host: str, settings: list[str], vms: list[str]) -> None:
        self.host, self.settings, self.vms = host, settings, vms
        super().__init__(
            f"host {host}: {'; '.join(settings)} takes effect only after Xorg restarts, "
            f"and Xorg restarts only with no vGPU VM running; running there: "
            f"{', '.join(vms)}. Nothing was changed. Shut them down (or drain the host with "
            "`vgpu drain`), then run again")


@dataclass(frozen=True)
class XorgService:
    """The host's Xorg service as its HostServiceSystem lists it; ``why`` when unknown."""

    running: bool | None
    why: str | None = None


def read_xorg(facts: HostFacts) -> XorgService:
    if facts.service_system is None:
        return XorgService(None, "the host has no service system")
    try:
        services = facts.service_system.serviceInfo.service or []
    except vmodl.MethodFault as exc:
        return XorgService(None, f"reading its services failed: {exc.msg or type(exc).__name__}")
    xorg = next((s for s in services if s.key == XORG), None)
    if xorg is None:
        return XorgService(None, "the host lists no xorg service")
    return XorgService(bool(xorg.running))


def pending_graphics_types(facts: HostFacts) -> list[str]:
    """Each GPU whose configured graphics type is not the one in effect, described."""
    config = facts.graphics_config
    configured = {d.deviceId: d.graphicsType
                  for d in getattr(config, "deviceType", None) or [] if d.graphicsType}
    default = getattr(config, "hostDefaultGraphicsType", None)
    out = []
    for pci, active in sorted(facts.graphics_active_per_gpu.items()):
        wanted = configured.get(pci) or default
        if wanted and wanted != active:
            out.append(f"GPU {pci} graphics type {active} -> {wanted}")
    return out


def running_vgpu_vms(facts: HostFacts) -> list[str]:
    """The powered-on vGPU VMs on the host: those its GPUs list, and those holding a vGPU."""
    listed = {vm for vms in facts.vms_per_gpu.values() for vm in vms}
    return sorted(listed | {h.vm for h in facts.held_vgpus if h.powered_on})


def refuse_if_vgpu_vms_run(facts: HostFacts, settings: list[str]) -> None:
    """XorgBlocked when a restart for ``settings`` would run under vGPU VMs."""
    running = running_vgpu_vms(facts)
    if running:
        raise XorgBlocked(facts.name, settings, running)


def restart_xorg(facts: HostFacts, settings: list[str]) -> str:
    """Restart Xorg so ``settings`` take effect; what was done. XorgBlocked while vGPU VMs
    run; RemoteError, with the command to run on the host, when the host refuses."""
    refuse_if_vgpu_vms_run(facts, settings)
    if facts.service_system is None:
        raise RemoteError(f"host {facts.name}: {'; '.join(settings)} takes effect only after "
                          f"Xorg restarts, and the host has no service system; run on the "
                          f"host: {ON_HOST_RESTART}")
    try:
        facts.service_system.RestartService(id=XORG)
    except vmodl.MethodFault as exc:
        why = getattr(exc, "msg", None) or type(exc).__name__
        raise RemoteError(f"host {facts.name}: restarting Xorg failed ({why}); "
                          f"{'; '.join(settings)} is not in effect; run on the host: "
                          f"{ON_HOST_RESTART}") from None
    return f"{facts.name}: Xorg restarted ({'; '.join(settings)} in effect)"


def put_in_effect(facts: HostFacts, settings: list[str]) -> str:
    """Settings just configured, put in effect where Xorg runs (restarted: XorgBlocked under
    vGPU VMs); where it does not (compute GPUs), they wait for the host's next boot, said.
    What was done."""
    if read_xorg(facts).running is False:
        return (f"{facts.name}: {'; '.join(settings)} set; it takes effect at the host's next "
                "boot (Xorg does not run there: compute GPUs in vGPU mode need none); the "
                "VMs' GPUs are checked against the plan after they power on")
    return restart_xorg(facts, settings)


def needs_restart(facts: HostFacts) -> bool:
    """A graphics setting changed on this host would restart Xorg (it runs there)."""
    return read_xorg(facts).running is not False


def xorg_problem(facts: HostFacts) -> str | None:
    """Why vSGA VMs cannot power on for want of Xorg on the host, or None (also when the
    host does not say, and where no GPU is in vSGA mode: vGPU needs no Xorg)."""
    if needs_xorg(facts) and read_xorg(facts).running is False:
        return (f"the Xorg service of host {facts.name} is not running (its vSGA GPUs need "
                "it); "
                f"start it (vSphere Client: the host's Services, X.Org Server; or on the "
                f"host: {ON_HOST_START})")
    return None


def settle_graphics(facts: HostFacts, policy_before: str | None, booted_since: bool,
                    say: Callable[[str], None]) -> None:
    """After a window (the host drained since ``policy_before`` was in effect): put the
    graphics settings configured meanwhile in effect (Xorg restarted, unless the host booted
    since), then require Xorg running. RemoteError otherwise, nothing else changed."""
    pending = pending_graphics_types(facts)
    if policy_before and facts.assignment_policy != policy_before and not booted_since:
        pending.append(f"GPU assignment policy {policy_before} -> "
                       f"{facts.assignment_policy or '-'}")
    if pending:
        was_running = read_xorg(facts).running
        try:
            say(restart_xorg(facts, pending))
        except XorgBlocked:
            raise
        except RemoteError as exc:
            if was_running is not False:
                raise
            stays = f" Host {facts.name} stays in maintenance mode." \
                if facts.in_maintenance else ""
            raise RemoteError(
                f"{exc}. Xorg does not run on host {facts.name} (compute GPUs in vGPU mode "
                "need none, and on A100/H100 it often does not start), so these settings "
                f"take effect only at a boot.{stays} Reboot {facts.name}, then undrain it "
                "again") from None
    problem = xorg_problem(facts)
    if problem:
        stays = f" Host {facts.name} stays in maintenance mode;" if facts.in_maintenance else ""
        raise RemoteError(f"{problem}.{stays} undrain it again once Xorg runs")

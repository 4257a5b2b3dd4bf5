"""The simulator lab as the commands see it (vgpu.site.SimulatedLab): guests follow the
lab's VMs (``vgpu apply`` on the lab's inventory starts one guest per VM it made, at the
VM's planned IP, its simulated nvidia-smi answering as the vGPU / MIG slice the plan gave
that VM; ``vgpu destroy`` removes them), and the lab says how its guests run the harness.
Any other inventory has no lab: :func:`lab_for` returns None unless the path is the
inventory ``vgpu sim up`` wrote for the running lab."""

from __future__ import annotations

import sysconfig
from dataclasses import dataclass
from pathlib import Path

from vgpu.model.plan import Plan, PlannedVM
from vgpu.model.scenario import HarnessRuntime, Scenario
from vgpu.sim import dockerd, guests, state
from vgpu.sim.guests import Guest, GuestHardware


def lab_of(inventory_path: Path) -> state.LabRecord | None:
    """The running simulator lab whose inventory this is, else None."""
    record = state.status()
    if record is None:
        return None
    return record if Path(record.inventory) == inventory_path.resolve() else None


def hardware_of(vm: PlannedVM) -> GuestHardware:
    """What the VM's guest shows: its vGPU (MIG-backed or time-sliced) or passthrough GPUs."""
    if not vm.vgpus:
        return GuestHardware(vgpu_type="none", gpu_count=0)
    first = vm.vgpus[0]
    if first.kind == "passthrough":
        return GuestHardware(vgpu_type="passthrough", gpu_count=len(vm.vgpus),
                             gpu_name=guests.PASSTHROUGH_GPU_NAME)
    return GuestHardware(vgpu_type=first.vgpu_type or first.label,
                         mig_profile=first.label if first.kind == "mig" else None,
                         gpu_count=len(vm.vgpus))


SIM_RUNTIME_NOTE = ("simulator lab without a real Docker daemon: the guests' docker is a "
                    "simulator that can neither build nor run the harness image, so the "
                    "harness runs in its venv on each guest (runtime host), with this "
                    "machine's Python packages")
SIM_CONTAINER_NOTE = ("simulator lab: the guests' docker forwards to the lab's real Docker "
                      "daemon, so the harness image is built FROM the lab's Debian base "
                      f"({dockerd.BASE_TAG}, standing in for the NGC image) with ONNX "
                      "Runtime's CPU build, and every instance runs in its own container on "
                      "the CPU (the guests' GPUs are simulated)")


@dataclass(frozen=True)
class FollowingLab:
    """The running simulator lab behind an inventory, read once from its record."""

    record: state.LabRecord

    description = ("vgpu sim lab: vCenter simulator, simulated GPU and NVIDIA guest "
                   "tooling, harness on the CPU")
    base_image = dockerd.BASE_TAG

    @property
    def guests_missing(self) -> str | None:
        return None if self.record.guest_network is not None else (
            self.record.guests_missing or "not recorded")

    @property
    def docker_host(self) -> str | None:
        daemon = self._daemon()
        return daemon.host if daemon is not None else None

    def _daemon(self) -> dockerd.LabDaemon | None:
        network = self.record.guest_network
        return network.daemon() if network is not None else None

    def guest_runtime(self) -> HarnessRuntime:
        """How the guests run the harness: containers where the lab has a real daemon."""
        return "container" if self._daemon() is not None else "host"

    def runtime_note(self) -> str:
        return SIM_CONTAINER_NOTE if self._daemon() is not None else SIM_RUNTIME_NOTE

    def on_guests(self, scenario: Scenario) -> Scenario:
        """The scenario as the guests can run it: in containers of an image built FROM
        the lab's base where the lab has a real daemon, else the harness venv."""
        if self.guest_runtime() == "container":
            update: dict[str, object] = {"runtime": "container",
                                         "container_runtime": "docker",
                                         "base_image": dockerd.BASE_TAG,
                                         "harness_image": None}
        elif scenario.guest.effective_runtime == "host":
            return scenario
        else:
            update = {"runtime": "host"}
        return scenario.model_copy(update={"guest": scenario.guest.model_copy(update=update)})

    def harness_site_dirs(self) -> tuple[str, ...]:
        """This machine's Python packages, for the guests' harness venv (the guests share
        this machine's filesystem and cannot reach a package index)."""
        return (sysconfig.get_paths()["purelib"],)

    def scenario_guests(self, plan: Plan) -> list[Guest]:
        """The running guests of the plan's VMs."""
        network = self.record.guest_network
        if network is None:
            return []
        names = {vm.name for vm in _addressed(plan)}
        return [g for g in guests.read_guests(network) if g.vm in names and g.running()]

    def start_for_apply(self, plan: Plan) -> list[Guest]:
        """A guest for every VM of the plan that has none yet (apply made or kept it)."""
        network = self.record.guest_network
        if network is None:
            return []
        have = {(g.vm, g.address) for g in guests.read_guests(network) if g.running()}
        started = []
        for vm in _addressed(plan):
            if (vm.name, vm.ip) in have or not vm.ip or not guests.in_pool(network, vm.ip):
                continue
            started.append(guests.start_guest(network, vm.name, vm.ip, hardware_of(vm)))
        return started

    def stop_for_destroy(self, plan: Plan) -> list[Guest]:
        network = self.record.guest_network
        if network is None:
            return []
        names = {vm.name for vm in _addressed(plan)}
        addresses = [g.address for g in guests.read_guests(network) if g.vm in names]
        return guests.stop_guests(network, addresses)


    def upgrade_host(self, host: str, esxi_build: str | None, vib_version: str | None,
                     faults: dict[str, float]) -> str:
        """`vgpu sim upgrade --host` with the faults asked (a campaign's upgrade method
        sim): the simulator's answer."""
        from vgpu.sim.hostupgrade import UPGRADED_BUILD, UPGRADED_VIB, HostUpgrade

        _, answer = state.upgrade_one_host(HostUpgrade(
            host, esxi_build or UPGRADED_BUILD, vib_version or UPGRADED_VIB,
            drop_vib=bool(faults.get("drop_vib")),
            unload_module=bool(faults.get("unload_module")),
            slowdown=float(faults.get("slowdown", 0.0))))
        return answer


def _addressed(plan: Plan) -> list[PlannedVM]:
    return [vm for vm in plan.vms if vm.ip]


def lab_for(inventory_path: Path) -> FollowingLab | None:
    """The running simulator lab whose inventory this is, else None."""
    record = lab_of(inventory_path)
    return FollowingLab(record) if record is not None else None

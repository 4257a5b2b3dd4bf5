"""Guests follow the simulator lab's VMs: ``vgpu apply`` on the lab's inventory starts one
guest per VM it made (at the VM's planned IP, its simulated nvidia-smi answering as the
vGPU / MIG slice the plan gave that VM), ``vgpu destroy`` removes them. Any other
inventory is left alone: these functions do nothing unless ``inventory_path`` is the
inventory ``vgpu sim up`` wrote for the running lab."""

from __future__ import annotations

from pathlib import Path

from vgpu.bench.runtime import Runtime
from vgpu.model.inventory import Inventory
from vgpu.model.plan import PlannedVM
from vgpu.model.scenario import Scenario
from vgpu.plan import build_plan
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


def _guest_network(inventory_path: Path) -> guests.GuestNetwork | None:
    """The guest network of the running lab whose inventory this is (None: no such lab, or
    one without guests)."""
    record = lab_of(inventory_path)
    return record.guest_network if record else None


def _planned(scenario: Scenario, inventory: Inventory, inventory_path: Path) -> list[PlannedVM]:
    plan = build_plan(scenario, inventory, inventory_name=str(inventory_path))
    return [vm for vm in plan.vms if vm.ip]


def start_for_apply(scenario: Scenario, inventory: Inventory,
                    inventory_path: Path) -> list[Guest]:
    """A guest for every VM of the scenario that has none yet (apply made or kept the VM)."""
    network = _guest_network(inventory_path)
    if network is None:
        return []
    have = {(g.vm, g.address) for g in guests.read_guests(network) if g.running()}
    started = []
    for vm in _planned(scenario, inventory, inventory_path):
        if (vm.name, vm.ip) in have or not vm.ip or not guests.in_pool(network, vm.ip):
            continue
        started.append(guests.start_guest(network, vm.name, vm.ip, hardware_of(vm)))
    return started


def stop_for_destroy(scenario: Scenario, inventory: Inventory,
                     inventory_path: Path) -> list[Guest]:
    network = _guest_network(inventory_path)
    if network is None:
        return []
    names = {vm.name for vm in _planned(scenario, inventory, inventory_path)}
    addresses = [g.address for g in guests.read_guests(network) if g.vm in names]
    return guests.stop_guests(network, addresses)


def scenario_guests(scenario: Scenario, inventory: Inventory,
                    inventory_path: Path) -> list[Guest] | None:
    """The running guests of the scenario's VMs in the lab; None when this inventory is not
    a running simulator lab's."""
    record = lab_of(inventory_path)
    if record is None:
        return None
    network = record.guest_network
    if network is None:
        return []
    names = {vm.name for vm in _planned(scenario, inventory, inventory_path)}
    return [g for g in guests.read_guests(network) if g.vm in names and g.running()]


SIM_RUNTIME_NOTE = ("simulator lab without a real Docker daemon: the guests' docker is a "
                    "simulator that can neither build nor run the harness image, so the "
                    "harness runs in its venv on each guest (runtime host), with this "
                    "machine's Python packages")
SIM_CONTAINER_NOTE = ("simulator lab: the guests' docker forwards to the lab's real Docker "
                      "daemon, so the harness image is built FROM the lab's Debian base "
                      f"({dockerd.BASE_TAG}, standing in for the NGC image) with ONNX "
                      "Runtime's CPU build, and every instance runs in its own container on "
                      "the CPU (the guests' GPUs are simulated)")


def lab_daemon(inventory_path: Path) -> dockerd.LabDaemon | None:
    """The real Docker daemon of the simulator lab whose inventory this is, if it has one."""
    network = _guest_network(inventory_path)
    return network.daemon() if network is not None else None


def guest_runtime(inventory_path: Path) -> Runtime:
    """How the lab's guests run the harness: containers where the lab has a real daemon."""
    return "container" if lab_daemon(inventory_path) is not None else "host"


def runtime_note(inventory_path: Path) -> str:
    return SIM_CONTAINER_NOTE if lab_daemon(inventory_path) is not None else SIM_RUNTIME_NOTE


def on_guests(scenario: Scenario, inventory_path: Path) -> Scenario:
    """The scenario as the lab's guests can run it: in containers of an image built FROM
    the lab's base where the lab has a real daemon, else the harness venv (runtime host)."""
    if guest_runtime(inventory_path) == "container":
        update: dict[str, object] = {"runtime": "container", "container_runtime": "docker",
                                     "base_image": dockerd.BASE_TAG, "harness_image": None}
    elif scenario.guest.effective_runtime == "host":
        return scenario
    else:
        update = {"runtime": "host"}
    return scenario.model_copy(update={"guest": scenario.guest.model_copy(update=update)})


def harness_site_dirs() -> tuple[str, ...]:
    """This machine's Python packages, for the guests' harness venv (the guests share this
    machine's filesystem and cannot reach a package index)."""
    import sysconfig

    return (sysconfig.get_paths()["purelib"],)

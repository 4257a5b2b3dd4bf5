"""A scenario's targets found, connected and ready to run on, for every command that runs
workloads: on an inventory's hosts (its VMs or bare-metal hosts over SSH) or on this
machine (its MIG devices, GPUs or CPU cores), with the notes on them and the container
CLI that starts their containers."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from vgpu.container.docker import DockerCli
from vgpu.defaults import DEFAULT_MAX_CLOCK_OFFSET_MS
from vgpu.model.scenario import Scenario
from vgpu.remote.targets import ConnectOptions
from vgpu.site import Site
from vgpu.targets import devices
from vgpu.targets.connect import HostTargetHook
from vgpu.targets.local import cores_each, local_targets
from vgpu.targets.runtime import RuntimeOptions, local_container, remote_container
from vgpu.targets.target import Target


@dataclass(frozen=True)
class TargetRequest:
    """Where and how a scenario's instances run: the site (an empty Site: this machine),
    the container runtime, whether CPU devices may stand in for GPUs. ``host_target_hook``
    and ``connect`` let a caller reach the inventory's hosts some other way (the SSH lab
    of the tests)."""

    site: Site
    runtime: RuntimeOptions
    allow_cpu: bool
    simulated_gpu: bool = False
    max_clock_offset_ms: float = DEFAULT_MAX_CLOCK_OFFSET_MS
    host_target_hook: HostTargetHook | None = None
    connect: ConnectOptions = field(default_factory=ConnectOptions)


@dataclass
class Prepared:
    """A scenario's targets, connected, with the notes on them and the container CLI."""

    scenario: Scenario
    targets: list[Target]
    notes: list[str]
    cli: DockerCli

    @property
    def on_cpu(self) -> bool:
        return all(t.device.get("kind") == "cpu" for t in self.targets)

    def close(self) -> None:
        for transport in {id(t.transport): t.transport for t in self.targets}.values():
            transport.close()


def prepare_targets(sc: Scenario, request: TargetRequest, logs_root: Path) -> Prepared:
    """The scenario's targets: the inventory's hosts when the site has an inventory, else
    this machine's devices. Raises InputError / RemoteError before anything runs."""
    if request.site.inventory is not None:
        return _inventory_targets(sc, request, logs_root / "ssh")
    found = devices.discover()
    gpu = any(d.kind != "cpu" and not d.simulated for d in found)
    container, notes = local_container(request.runtime, gpu)
    targets, more = local_targets(sc, found, logs_root / "work", container=container,
                                  simulated_gpu=request.simulated_gpu)
    return Prepared(sc, targets, notes + more, request.runtime.cli)


def _inventory_targets(sc: Scenario, request: TargetRequest, log_root: Path) -> Prepared:
    from vgpu.targets.connect import build_targets
    from vgpu.targets.placements import scenario_placements

    site = request.site
    assert site.inventory is not None
    loaded = site.inventory
    if sc.platform == "bare-metal" and loaded.is_local:
        # This machine only: its devices come from NVML (or the GPU simulator), as without
        # an inventory, so MIG devices `vgpu apply` created are found by their owner.
        targets, notes = local_targets(sc, devices.discover(), log_root)
        return Prepared(sc, targets, notes, loaded.docker_cli())
    placements = scenario_placements(sc, site)
    targets, notes = build_targets(placements, log_root, request.connect,
                                   request.host_target_hook, allow_cpu=request.allow_cpu,
                                   container=remote_container(sc, loaded, request.runtime),
                                   max_clock_offset_ms=request.max_clock_offset_ms)
    if site.lab is not None:
        notes.append(split_this_machine(targets))
    return Prepared(sc, targets, notes, loaded.docker_cli())


def split_this_machine(targets: list[Target], cores: int | None = None) -> str:
    """The simulator lab's guests all run on this machine's cores: its CPU instances split
    them as a bare-metal CPU run here does (threads and container --cpus), so neither side
    of a verdict oversubscribes the cores the other gets to itself."""
    cores = cores or devices.cpu_count()
    on_cpu = [t for t in targets if t.device.get("kind") == "cpu"]
    threads = cores_each(cores, len(on_cpu))
    for target in on_cpu:
        target.threads = threads
        if target.container is not None:
            target.container = replace(target.container, cpus=float(threads))
    return (f"simulator lab: its {len(on_cpu)} guest instance(s) share this machine's "
            f"{cores} cores, {threads} intra-op thread(s) each, as a CPU run here")

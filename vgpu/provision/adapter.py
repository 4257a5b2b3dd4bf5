"""From the Plan and the Inventory to provisioning jobs: which hosts, how to reach them,
and what each should end up with. Pure: reads local files only for their existence."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from vgpu import stepnames
from vgpu.container.images import HeldImage, UnknownDriverBranch, driver_branch
from vgpu.model.inventory import BareMetalHost, Inventory
from vgpu.model.plan import Plan, PlannedVgpu, PlannedVM
from vgpu.model.scenario import Scenario
from vgpu.planner import harness_base_for
from vgpu.provision.fanout import Job
from vgpu.provision.reach import host_target, local_path
from vgpu.provision.requirements import (
    COMPUTE_SERVER_FEATURE_TYPE,
    VGPU_FEATURE_TYPE,
    GuestRequirements,
    HarnessImageSpec,
    HarnessSpec,
)
from vgpu.provision.steps.harness import harness_version

# The node harness's own dependencies (see pyproject), pinned to what this machine runs.
HARNESS_DISTRIBUTIONS = ("mlcommons-loadgen", "numpy", "onnxruntime", "tritonclient")
# On a guest with a planned GPU the harness gets ONNX Runtime's GPU build (CUDA and
# TensorRT providers) at the same version; the CPU build only where no GPU is planned.
GPU_BUILDS = {"onnxruntime": "onnxruntime-gpu"}


@dataclass(frozen=True)
class HarnessOptions:
    install_requirements: bool = True
    python: str = "python3"
    extra_site_dirs: tuple[str, ...] = ()
    pip_args: tuple[str, ...] = ()
    gpu_image: bool = True  # False: the harness image gets ONNX Runtime's CPU build everywhere


def harness_source_dir() -> Path:
    spec = importlib.util.find_spec("loadgen")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the loadgen package is not importable: reinstall vgpu")
    return Path(next(iter(spec.submodule_search_locations)))


def pinned_requirements(gpu: bool = False) -> tuple[str, ...]:
    pins = []
    for name in HARNESS_DISTRIBUTIONS:
        wanted = GPU_BUILDS.get(name, name) if gpu else name
        try:
            pins.append(f"{wanted}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            pins.append(wanted)
    return tuple(pins)


def harness_spec(options: HarnessOptions, gpu: bool = False) -> HarnessSpec:
    source = harness_source_dir()
    return HarnessSpec(
        source_dir=source, version=harness_version(source),
        requirements=pinned_requirements(gpu) if options.install_requirements else (),
        python=options.python, extra_site_dirs=options.extra_site_dirs,
        pip_args=options.pip_args,
    )


def image_spec(scenario: Scenario, gpu: bool, inventory: Inventory | None = None
               ) -> HarnessImageSpec:
    """The harness image for a container guest: ONNX Runtime's GPU build where a GPU is
    planned, as for the host venv; built FROM the base matched to the guest driver, and
    labelled with that driver's branch."""
    drivers = inventory.drivers if inventory and scenario.platform == "vsphere" else None
    version = drivers.guest_version() if drivers else None
    return HarnessImageSpec(base_image=harness_base_for(scenario, inventory).image,
                            pull=scenario.guest.harness_image,
                            ort_package=GPU_BUILDS["onnxruntime"] if gpu else "onnxruntime",
                            driver_branch=_branch(version))


def _branch(version: str | None) -> int | None:
    try:
        return driver_branch(version) if version else None
    except UnknownDriverBranch:
        return None


@dataclass(frozen=True)
class _GuestPlan:
    """What one job's guest gets beyond the scenario: its steps and harness, by GPU."""

    steps: tuple[str, ...]
    harness: HarnessSpec | None
    image: HarnessImageSpec | None


def _guest_plans(plan: Plan, scenario: Scenario, options: HarnessOptions,
                 inventory: Inventory) -> dict[bool, _GuestPlan]:
    venv = stepnames.NODE_HARNESS in plan.guest_steps
    container = stepnames.HARNESS_IMAGE in plan.guest_steps
    return {gpu: _GuestPlan(
        steps=tuple(s for s in plan.guest_steps if gpu or s != stepnames.GPU_PROBE),
        harness=harness_spec(options, gpu) if venv else None,
        image=image_spec(scenario, gpu and options.gpu_image, inventory) if container
        else None,
    ) for gpu in (False, True)}


def feature_type(scenario: Scenario, vgpus: list[PlannedVgpu]) -> int:
    """The scenario's guest.feature_type, else by what the VM has: a vGPU (MIG-backed or
    time-sliced) licenses as NVIDIA vGPU, passed-through GPUs as Virtual Compute Server."""
    if scenario.guest.feature_type is not None:
        return scenario.guest.feature_type
    if any(v.kind != "passthrough" for v in vgpus):
        return VGPU_FEATURE_TYPE
    return COMPUTE_SERVER_FEATURE_TYPE


def _requirements(scenario: Scenario, inventory: Inventory, guest: _GuestPlan,
                  vgpus: list[PlannedVgpu], base_dir: Path) -> GuestRequirements:
    vgpu_types, mig_profiles = _expectations(vgpus)
    token = local_path(inventory.drivers.licence_token, base_dir)
    datacenter = scenario.guest.driver == "datacenter"
    drivers = inventory.drivers
    return GuestRequirements(
        steps=guest.steps,
        base_packages=tuple(scenario.guest.base_packages),
        container_runtime=scenario.guest.container_runtime,
        driver_kind="datacenter" if datacenter else "vgpu-guest",
        driver_source=local_path(drivers.datacenter_driver if datacenter
                                  else drivers.guest_driver, base_dir),
        driver_version=None if datacenter else drivers.guest_driver_version,
        host_driver_version=None if datacenter else drivers.host_driver_version,
        compatible_guest_branches=tuple(drivers.compatible_guest_branches),
        feature_type=feature_type(scenario, vgpus),
        licence_token_file=Path(token) if token else None,
        expected_vgpu_types=tuple(vgpu_types),
        expected_mig_profiles=tuple(mig_profiles),
        harness=guest.harness,
        image=guest.image,
        docker=inventory.docker_cli(),
    )


def _expectations(vgpus: list[PlannedVgpu]) -> tuple[list[str], list[str]]:
    """The vGPU types and MIG profiles ``nvidia-smi -L`` should list."""
    types = [v.vgpu_type for v in vgpus if v.vgpu_type]
    migs = [v.label for v in vgpus if v.kind == "mig"]
    return types, migs


def jobs_from_plan(
    plan: Plan, scenario: Scenario, inventory: Inventory, *, inventory_dir: Path,
    harness: HarnessOptions | None = None,
) -> list[Job]:
    """One job per VM (vSphere) or per bare-metal host the plan uses."""
    guests = _guest_plans(plan, scenario, harness or HarnessOptions(), inventory)
    jobs: list[Job] = []
    if plan.platform == "vsphere":
        for vm in plan.vms:
            if not vm.ip:
                continue
            jobs.append(Job(host_target(vm.name, vm.ip, inventory.ssh, inventory_dir),
                            _requirements(scenario, inventory, guests[bool(vm.vgpus)],
                                          vm.vgpus, inventory_dir)))
        return jobs
    hosts: dict[str, BareMetalHost] = {h.name: h for h in inventory.bare_metal}
    by_host: dict[str, list[PlannedVM]] = {}
    for vm in plan.vms:
        by_host.setdefault(vm.host, []).append(vm)
    for host_name, vms in by_host.items():
        host = hosts[host_name]
        # A bare-metal host's instances are MIG devices or whole GPUs, not vGPUs.
        devices = [v.model_copy(update={"vgpu_type": None}) for vm in vms for v in vm.vgpus]
        jobs.append(Job(host_target(host.name, host.address, host.ssh or inventory.ssh,
                                inventory_dir),
                        _requirements(scenario, inventory,
                                      guests[any(vm.vgpus for vm in vms)], devices,
                                      inventory_dir)))
    return jobs


def holding_image(jobs: list[Job], held: HeldImage) -> list[Job]:
    """The jobs with the harness image held fixed on every container guest (step
    harness-image then only checks that image is there, by its ID)."""
    return [dataclasses.replace(job, requirements=dataclasses.replace(
        job.requirements, image=dataclasses.replace(job.requirements.image, held=held)))
        if job.requirements.image is not None else job for job in jobs]


def missing_addresses(plan: Plan) -> list[str]:
    return [vm.name for vm in plan.vms if plan.platform == "vsphere" and not vm.ip]

"""Where each harness instance runs on its target: in its own container of the harness
image (the lab default: the studies ran every benchmark in NVIDIA containers) or in the
host's harness venv. This module turns the choice into the ContainerLaunch the targets
carry; the image comes from vgpu's Dockerfile (vgpu.container)."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from vgpu.container.docker import DockerCli
from vgpu.container.images import DEFAULT_BASE_IMAGE, HeldImage, ImageBuild, default_tag
from vgpu.container.local import ensure_image, memlock_unlimited_allowed
from vgpu.model.inventory import Inventory
from vgpu.model.scenario import HarnessRuntime, Scenario
from vgpu.targets.containers import ContainerLaunch
from vgpu.targets.hostprobe import HOST_CACHE

RUNTIMES: tuple[HarnessRuntime, ...] = ("host", "container")


@dataclass(frozen=True)
class RuntimeOptions:
    """``runtime`` None: the scenario's choice on its VMs / hosts, the host venv here."""

    runtime: HarnessRuntime | None = None
    image: str | None = None  # harness image tag (built here when missing)
    base_image: str = DEFAULT_BASE_IMAGE
    docker_host: str | None = None
    held: HeldImage | None = None  # the remote instances run this image by its ID

    @property
    def cli(self) -> DockerCli:
        return DockerCli(host=self.docker_host)


def new_session() -> str:
    """A short id that keeps container names of concurrent bench runs apart."""
    return uuid.uuid4().hex[:10]


def local_container(options: RuntimeOptions, gpu: bool) -> tuple[ContainerLaunch | None,
                                                                  list[str]]:
    """The launch for this machine's instances (None: host venv) and what to tell the
    user about it. The image is built FROM ``base_image`` when the daemon lacks it."""
    if options.runtime != "container":
        return None, []
    build = ImageBuild(tag=options.image or default_tag(), base_image=options.base_image,
                       ort_package="onnxruntime-gpu" if gpu else "onnxruntime", network="host")
    image = ensure_image(build, options.cli)
    memlock = memlock_unlimited_allowed()
    origin = f", built now FROM {build.base_image}" if image.built else ""
    notes = [f"container runtime: each instance in its own container of {image.tag} "
             f"({image.image_id[:19]}{origin})"]
    if not memlock:
        notes.append("container runtime: no --ulimit memlock=-1 (this machine does not allow "
                     "it; pinned host memory for GPU copies may be smaller)")
    cache = Path.home() / HOST_CACHE
    cache.mkdir(parents=True, exist_ok=True)
    launch = ContainerLaunch(image=image.tag, image_id=image.image_id, session=new_session(),
                             cli=options.cli, memlock_unlimited=memlock,
                             user=f"{os.getuid()}:{os.getgid()}", cache_dir=str(cache))
    return launch, notes


def remote_container(scenario: Scenario, inventory: Inventory,
                     options: RuntimeOptions) -> ContainerLaunch | None:
    """The launch for the instances on an inventory's guests or hosts: the scenario's
    ``guest.runtime`` unless --runtime says otherwise; the image is the one `vgpu
    provision` made there (step harness-image), under vgpu's tag, or the held image by its
    ID."""
    runtime = options.runtime or scenario.guest.effective_runtime
    if runtime != "container":
        return None
    held = options.held
    return ContainerLaunch(image=held.reference if held else default_tag(),
                           image_id=held.image_id if held else None, held=held is not None,
                           session=new_session(),
                           cli=inventory.docker_cli(),
                           memlock_unlimited=inventory.docker.unlimited_memlock)

"""Where each harness instance runs on its target: in its own container of the harness
image (the lab default: the studies ran every benchmark in NVIDIA containers) or in the
host's harness venv. This module turns the choice into the ContainerLaunch the targets
carry; the image comes from vgpu's Dockerfile (vgpu.container)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal

from vgpu.bench.containers import ContainerLaunch
from vgpu.container.docker import DockerCli
from vgpu.container.images import DEFAULT_BASE_IMAGE, ImageBuild, default_tag
from vgpu.container.local import ensure_image, memlock_unlimited_allowed

Runtime = Literal["host", "container"]
RUNTIMES: tuple[str, ...] = ("host", "container")


@dataclass(frozen=True)
class RuntimeOptions:
    """``runtime`` None: the scenario's choice on its VMs / hosts, the host venv here."""

    runtime: Runtime | None = None
    image: str | None = None  # harness image tag (built here when missing)
    base_image: str = DEFAULT_BASE_IMAGE
    docker_host: str | None = None

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
    launch = ContainerLaunch(image=image.tag, image_id=image.image_id, session=new_session(),
                             cli=options.cli, memlock_unlimited=memlock)
    return launch, notes

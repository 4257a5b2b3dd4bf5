"""What one benchmark host offers its harness instances, read once per host before a
round: the harness's execution providers (in the host venv, or inside the harness image
when instances run in containers), the GPUs and MIG devices `nvidia-smi -L` lists, and
where the rounds' work folders go."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path

from vgpu.container import docker
from vgpu.container.spec import ContainerSpec
from vgpu.errors import RemoteError
from vgpu.provision.facts import GPU_LIST, GpuListing
from vgpu.remote.transport import Transport
from vgpu.targets.containers import ContainerLaunch

HOST_CACHE = ".cache/vgpu-harness/models"  # below the login home: the built model files


@dataclass
class HostHarness:
    """One host's harness: ``harness`` starts it from the host venv; ``container`` (when
    set) runs every round in its own container instead."""

    transport: Transport
    harness: str
    work_root: str
    providers: list[str]
    listing: GpuListing
    container: ContainerLaunch | None = None
    mig_pool: dict[str, list[str]] = field(default_factory=dict)

    def launch_for(self, devices: tuple[str, ...]) -> ContainerLaunch | None:
        return None if self.container is None else replace(self.container, devices=devices)


def _venv_providers(transport: Transport, python: str, name: str) -> list[str]:
    probe = transport.run(f"{python} -c 'import loadgen, onnxruntime as o; "
                          "print(\",\".join(o.get_available_providers()))'", timeout=120)
    if not probe.ok:
        raise RemoteError(f"{name}: the node harness is not usable ({probe.tail()}); run "
                          "`vgpu provision` for this scenario first")
    return probe.stdout.strip().split(",")


def _image_id(transport: Transport, launch: ContainerLaunch, name: str) -> str:
    found = transport.run(shlex.join(docker.image_id_argv(launch.run_image, launch.cli)),
                          timeout=120)
    if not found.ok or not found.stdout.strip():
        if launch.held:
            raise RemoteError(f"{name}: the held harness image {launch.image} "
                              f"({launch.image_id}) is not there ({found.tail()}); put it "
                              "back (docker pull by digest, or docker save / docker load "
                              "from a guest that has it), or rebuild it")
        raise RemoteError(f"{name}: no harness image {launch.image} there ({found.tail()}); "
                          "run `vgpu provision` for this scenario (step harness-image)")
    return found.stdout.strip().splitlines()[-1]


def _image_providers(transport: Transport, launch: ContainerLaunch, name: str) -> list[str]:
    spec = ContainerSpec(image=launch.run_image, run_id=f"{launch.session}-probe", instance=name,
                         work_dir=Path(transport_home(transport)), command=("--version",),
                         interactive=False, memlock_unlimited=launch.memlock_unlimited)
    probe = transport.run(shlex.join(docker.run_argv(spec, launch.cli)), timeout=300)
    try:
        info = json.loads(probe.stdout[probe.stdout.index("{"):])
        return [str(p) for p in info["onnxruntime"]["providers"]]
    except (ValueError, KeyError, TypeError):
        raise RemoteError(f"{name}: the harness image {launch.image} did not report its "
                          f"versions ({probe.tail()}); run `vgpu provision` again") from None


def _login_ids(transport: Transport) -> str:
    """uid:gid of the login, which the harness containers run as (results it can read and
    remove, not root's)."""
    found = transport.run("echo $(id -u):$(id -g)", timeout=60, check=True)
    return found.stdout.strip().splitlines()[-1]


def transport_home(transport: Transport) -> str:
    """The login folder of ``transport`` (the remote work root is below it)."""
    found = transport.run("pwd", timeout=60, check=True)
    return found.stdout.strip().splitlines()[-1]


def probe_host(transport: Transport, name: str, *, python: str, work_root: str,
               container: ContainerLaunch | None) -> HostHarness:
    """Reads the host once. ``work_root`` relative to the login folder; with containers it
    becomes absolute (docker mounts need that)."""
    listing = transport.run(GPU_LIST.command, timeout=60)
    gpus = GPU_LIST.process(listing.stdout if listing.ok else "")
    if container is None:
        return HostHarness(transport, f"{python} -m loadgen", work_root,
                           _venv_providers(transport, python, name), gpus,
                           mig_pool=gpus.mig_uuids())
    home = transport_home(transport)
    if not work_root.startswith("/"):
        work_root = f"{home}/{work_root}"
    launch = replace(container, image_id=_image_id(transport, container, name),
                     user=_login_ids(transport), cache_dir=f"{home}/{HOST_CACHE}")
    transport.run(f"mkdir -p {shlex.quote(launch.cache_dir or '')}", timeout=60, check=True)
    return HostHarness(transport, f"{python} -m loadgen", work_root,
                       _image_providers(transport, launch, name), gpus, launch,
                       mig_pool=gpus.mig_uuids())

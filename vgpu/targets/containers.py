"""Harness instances in containers: how a Target's command becomes `docker run` of the
harness image with the instance's GPU or MIG device, and how a round's leftover
containers are removed. The argv comes from vgpu.container; this module only binds it to
a target's work folder, device and round."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from vgpu.container import docker
from vgpu.container.docker import DockerCli
from vgpu.container.spec import ContainerSpec, harness_run_command

SPEC_FILE = "spec.json"


@dataclass(frozen=True)
class ContainerLaunch:
    """What every instance of one target shares: the image, the docker CLI to call, the
    devices the container gets (GPU or MIG UUIDs; empty for a CPU run) and the session
    the container names are made unique with."""

    image: str
    session: str  # unique per `vgpu bench` invocation (e.g. the series id's head)
    image_id: str | None = None  # sha256:... as the daemon reports it
    cli: DockerCli = field(default_factory=DockerCli)
    devices: tuple[str, ...] = ()
    cpus: float | None = None
    memlock_unlimited: bool = True
    user: str | None = None  # uid:gid the harness runs as (the login's, so it owns results)
    cache_dir: str | None = None  # host model cache mounted into every container
    held: bool = False  # run ``image_id`` itself (a revalidation's baseline image), not the tag

    @property
    def run_image(self) -> str:
        """What `docker run` is given: the held image's ID, else the image's reference."""
        return self.image_id if self.held and self.image_id else self.image

    def spec(self, instance: str, work_dir: str, tag: str,
             env: dict[str, str]) -> ContainerSpec:
        return ContainerSpec(
            image=self.run_image, run_id=f"{self.session}-{tag}", instance=instance,
            work_dir=Path(work_dir), command=harness_run_command(SPEC_FILE, "."),
            devices=self.devices, cpus=self.cpus, env=env,
            memlock_unlimited=self.memlock_unlimited, user=self.user,
            cache_dir=Path(self.cache_dir) if self.cache_dir else None)

    def run_command(self, instance: str, work_dir: str, tag: str,
                    env: dict[str, str]) -> str:
        """The shell command that runs one round of ``instance`` in its own container;
        ``work_dir`` (absolute, on the target) holds spec.json and receives the results."""
        if not PurePosixPath(work_dir).is_absolute():
            raise ValueError(f"container work dir must be absolute, got {work_dir}")
        return shlex.join(docker.run_argv(self.spec(instance, work_dir, tag, env), self.cli))

    def remove_command(self, instance: str, work_dir: str, tag: str) -> str:
        """Removes the round's container if it is still there (its client was killed)."""
        name = self.spec(instance, work_dir, tag, {}).name
        return shlex.join(docker.rm_argv([name], self.cli)) + " >/dev/null 2>&1 || true"

"""argv lists for the docker CLI: build, inspect, run, ps, kill, rm. Pure functions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vgpu.container.images import DOCKERFILE, ImageBuild
from vgpu.container.spec import INSTANCE_LABEL, RUN_LABEL, WORK_MOUNT, ContainerSpec


@dataclass(frozen=True)
class DockerCli:
    """How to call docker: the binary and an optional daemon address (``-H unix://...``)."""

    binary: str = "docker"
    host: str | None = None

    def argv(self, *args: str) -> list[str]:
        base = [self.binary]
        if self.host:
            base += ["-H", self.host]
        return [*base, *args]


DOCKER = DockerCli()


def build_argv(build: ImageBuild, context: Path, cli: DockerCli = DOCKER) -> list[str]:
    """``docker build`` of the harness image from a context made by write_build_context."""
    args = ["build", "-t", build.tag, "-f", str(context / DOCKERFILE)]
    for key, value in build.build_args().items():
        args += ["--build-arg", f"{key}={value}"]
    for key, value in build.labels.items():
        args += ["--label", f"{key}={value}"]
    if build.network:
        args += ["--network", build.network]
    if build.pull:
        args.append("--pull")
    if build.no_cache:
        args.append("--no-cache")
    return cli.argv(*args, str(context))


def image_id_argv(image: str, cli: DockerCli = DOCKER) -> list[str]:
    """Prints the image ID (``sha256:...``) of ``image``; exit code 1 if it is missing."""
    return cli.argv("image", "inspect", "--format", "{{.Id}}", image)


def gpus_value(devices: Sequence[str]) -> str:
    """The ``--gpus`` value for these UUIDs, quoted the way docker's CSV parser wants."""
    return f'"device={",".join(devices)}"'


def _resource_args(spec: ContainerSpec) -> list[str]:
    args: list[str] = []
    if spec.devices:
        args += ["--gpus", gpus_value(spec.devices)]
    if spec.ipc_host:
        args.append("--ipc=host")
    if spec.network:
        args.append(f"--network={spec.network}")
    if spec.memlock_unlimited:
        args += ["--ulimit", "memlock=-1"]
    if spec.cpus is not None:
        args += ["--cpus", f"{spec.cpus:g}"]
    return args


def run_argv(spec: ContainerSpec, cli: DockerCli = DOCKER) -> list[str]:
    """``docker run`` of one harness instance; the container is removed when it exits."""
    args = ["run", "--rm", "--name", spec.name]
    if spec.interactive:
        args.append("-i")
    if spec.init:
        args.append("--init")
    for key, value in spec.labels.items():
        args += ["--label", f"{key}={value}"]
    args += _resource_args(spec)
    if spec.user:
        args += ["--user", spec.user]
    for key, value in spec.environment().items():
        args += ["-e", f"{key}={value}"]
    for host_path, container_path in spec.mount_args():
        args += ["-v", f"{host_path}:{container_path}"]
    args += ["-w", WORK_MOUNT]
    return cli.argv(*args, spec.image, *spec.python_argv())


def ps_argv(run_id: str, instance: str | None = None, cli: DockerCli = DOCKER,
            all_states: bool = True, fmt: str = "{{.Names}}") -> list[str]:
    """Lists the containers of a run (or of one instance), one per line in ``fmt``."""
    args = ["ps", "--no-trunc", "--filter", f"label={RUN_LABEL}={run_id}"]
    if instance is not None:
        args += ["--filter", f"label={INSTANCE_LABEL}={instance}"]
    if all_states:
        args.append("-a")
    return cli.argv(*args, "--format", fmt)


def kill_argv(names: Sequence[str], cli: DockerCli = DOCKER,
              signal: str | None = None) -> list[str]:
    args = ["kill"] + (["--signal", signal] if signal else [])
    return cli.argv(*args, *names)


def rm_argv(names: Sequence[str], cli: DockerCli = DOCKER) -> list[str]:
    """Removes containers, killing running ones (``docker rm -f``)."""
    return cli.argv("rm", "-f", *names)


def version_argv(cli: DockerCli = DOCKER) -> list[str]:
    """Exit code 0 once the daemon answers."""
    return cli.argv("version", "--format", "{{.Server.Version}}")


def output_lines(stdout: str) -> list[str]:
    """The non-empty lines of a ps/inspect output."""
    return [line.strip() for line in stdout.splitlines() if line.strip()]

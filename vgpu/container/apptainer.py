"""argv lists for apptainer (``apptainer exec --nv``): the same harness instance as
vgpu.container.docker, for hosts that run apptainer instead of docker. Pure functions.

Apptainer has no names or labels: the run and instance go into the environment
(VGPU_RUN, VGPU_INSTANCE) so the processes can be found. It shares the host's network,
IPC and ulimits by default; GPUs are chosen with CUDA_VISIBLE_DEVICES (plain ``--nv``
binds the driver and every GPU; the UUID, GPU or MIG, narrows CUDA to one).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vgpu.container.spec import WORK_MOUNT, ContainerSpec


@dataclass(frozen=True)
class ApptainerCli:
    binary: str = "apptainer"

    def argv(self, *args: str) -> list[str]:
        return [self.binary, *args]


APPTAINER = ApptainerCli()


def apptainer_build_argv(sif: Path, image: str, cli: ApptainerCli = APPTAINER,
                         source: str = "docker-daemon") -> list[str]:
    """Converts a docker image into a .sif: ``source`` docker-daemon (the local docker
    daemon's image) or docker (a registry)."""
    return cli.argv("build", "--force", str(sif), f"{source}://{image}")


def _env_args(spec: ContainerSpec) -> list[str]:
    env = {"VGPU_RUN": spec.run_id, "VGPU_INSTANCE": spec.instance, **spec.environment()}
    if spec.devices:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(spec.devices)
        env["NVIDIA_VISIBLE_DEVICES"] = ",".join(spec.devices)
    args: list[str] = []
    for key, value in env.items():
        args += ["--env", f"{key}={value}"]
    return args


def exec_argv(spec: ContainerSpec, cli: ApptainerCli = APPTAINER) -> list[str]:
    """``apptainer exec`` of one harness instance from ``spec.image`` (a .sif or URI)."""
    args = ["exec", "--cleanenv", "--no-home"]
    if spec.devices:
        args.append("--nv")
    if spec.cpus is not None:
        args += ["--cpus", f"{spec.cpus:g}"]
    args += _env_args(spec)
    for host_path, container_path in spec.mount_args():
        args += ["--bind", f"{host_path}:{container_path}"]
    args += ["--pwd", WORK_MOUNT]
    return cli.argv(*args, spec.image, *spec.python_argv())

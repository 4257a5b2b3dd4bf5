"""The harness in a container: image build settings and argv lists for docker and apptainer.

Everything here is pure (values in, argv lists out) except write_build_context, which
writes the build folder. Running the commands is the caller's business.

    build = ImageBuild(base_image="nvcr.io/nvidia/pytorch:24.10-py3")
    write_build_context(ctx)
    subprocess.run(docker.build_argv(build, ctx))
    spec = ContainerSpec(image=build.tag, run_id="r1", instance="vm1-0", work_dir=host_dir,
                         command=harness_run_command("spec.json", "out"),
                         devices=("MIG-...",))
    subprocess.Popen(docker.run_argv(spec), stdin=PIPE, stdout=PIPE)
"""

from __future__ import annotations

from vgpu.container import apptainer, docker
from vgpu.container.apptainer import APPTAINER, ApptainerCli
from vgpu.container.docker import DOCKER, DockerCli
from vgpu.container.exits import describe_exit, killed_by
from vgpu.container.images import (
    DEFAULT_BASE_IMAGE,
    DEFAULT_ORT_PACKAGE,
    ImageBuild,
    default_tag,
    write_build_context,
)
from vgpu.container.spec import (
    HARNESS_PYTHON,
    INSTANCE_LABEL,
    RUN_LABEL,
    WORK_MOUNT,
    ContainerSpec,
    container_name,
    harness_run_command,
    in_container,
)

__all__ = [
    "APPTAINER",
    "DEFAULT_BASE_IMAGE",
    "DEFAULT_ORT_PACKAGE",
    "DOCKER",
    "HARNESS_PYTHON",
    "INSTANCE_LABEL",
    "RUN_LABEL",
    "WORK_MOUNT",
    "ApptainerCli",
    "ContainerSpec",
    "DockerCli",
    "ImageBuild",
    "apptainer",
    "container_name",
    "default_tag",
    "describe_exit",
    "docker",
    "harness_run_command",
    "in_container",
    "killed_by",
    "write_build_context",
]

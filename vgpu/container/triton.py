"""The Triton Inference Server as a container: the image vgpu deploys by default and the
docker argv that starts, probes and stops one server per host. Pure functions.

The server sees the model repository read-only at /models and listens on the host's
network (``--network host``), so the harness instances of that host reach it at
127.0.0.1 whether they run in the host venv or in containers of their own."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from vgpu.container.docker import DockerCli, gpus_value, rm_argv
from vgpu.container.spec import container_name

DEFAULT_TRITON_IMAGE = "nvcr.io/nvidia/tritonserver:24.10-py3"
MODELS_MOUNT = "/models"
BACKENDS_DIR = "/opt/tritonserver/backends"
SERVER_LABEL = "vgpu.triton"
READY_PATH = "/v2/health/ready"
READY = "ready"
GONE = "gone"
WAITING_STATES = frozenset({"created", "running", "restarting"})
_PROBE = "import urllib.request as r; r.urlopen({url!r}, timeout=2)"
_FREE_PORTS = ("import socket\nsockets = [socket.socket() for _ in range(3)]\n"
               "for s in sockets: s.bind(('', 0))\n"
               "print(*(s.getsockname()[1] for s in sockets))")


@dataclass(frozen=True)
class TritonPorts:
    http: int = 8000
    grpc: int = 8001
    metrics: int = 8002


@dataclass(frozen=True)
class TritonServerSpec:
    """One server container: ``repository`` is the host folder of the model repository
    (absolute), ``devices`` the GPU or MIG ids it gets (none: CPU only)."""

    image: str
    session: str
    host: str
    repository: str
    ports: TritonPorts = field(default_factory=TritonPorts)
    devices: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.repository.startswith("/"):
            raise ValueError(f"model repository must be absolute, got {self.repository}")

    @property
    def name(self) -> str:
        """``vgpu-triton-<session>-<host>``."""
        return container_name(f"triton-{self.session}", self.host)

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.ports.grpc}"

    def server_args(self) -> list[str]:
        return ["tritonserver", f"--model-repository={MODELS_MOUNT}",
                f"--http-port={self.ports.http}", f"--grpc-port={self.ports.grpc}",
                f"--metrics-port={self.ports.metrics}"]


def run_argv(spec: TritonServerSpec, cli: DockerCli) -> list[str]:
    """``docker run -d`` of the server. No ``--rm``: a server that exits while starting
    keeps its log for the error message; stopping removes it (rm_argv)."""
    args = ["run", "-d", "--name", spec.name, "--label", f"{SERVER_LABEL}={spec.session}",
            "--network=host", "--ipc=host"]
    if spec.devices:
        args += ["--gpus", gpus_value(spec.devices)]
    args += ["-v", f"{spec.repository}:{MODELS_MOUNT}:ro"]
    return cli.argv(*args, spec.image, *spec.server_args())


def pull_command(image: str, cli: DockerCli) -> str:
    """Pulls ``image`` unless the daemon has it already (a local image is never pulled)."""
    inspect = shlex.join(cli.argv("image", "inspect", image))
    return f"{inspect} >/dev/null 2>&1 || {shlex.join(cli.argv('pull', '-q', image))}"


def backends_argv(image: str, cli: DockerCli) -> list[str]:
    """Lists the backends the image's server has (``onnxruntime``, ``python``, ...)."""
    return cli.argv("run", "--rm", "--network=none", "--entrypoint", "ls", image,
                    BACKENDS_DIR)


def free_ports_command(python: str) -> str:
    """Prints three TCP ports free on the host (http, grpc, metrics)."""
    return f"{python} -c {shlex.quote(_FREE_PORTS)}"


def parse_ports(stdout: str) -> TritonPorts:
    http, grpc, metrics = (int(word) for word in stdout.split()[-3:])
    return TritonPorts(http=http, grpc=grpc, metrics=metrics)


def ready_command(spec: TritonServerSpec, python: str, cli: DockerCli) -> str:
    """Prints ``ready`` once the container runs and the server answers
    /v2/health/ready with 200, else the container's state (``running`` while it loads the
    model, ``exited``...) or ``gone``."""
    url = f"http://127.0.0.1:{spec.ports.http}{READY_PATH}"
    probe = f"{python} -c {shlex.quote(_PROBE.format(url=url))}"
    state = shlex.join(cli.argv("inspect", "--format", "{{.State.Status}}", spec.name))
    return (f"state=$({state} 2>/dev/null || echo {GONE}); "
            f'if [ "$state" = running ] && {probe} >/dev/null 2>&1; then echo {READY}; '
            f'else echo "$state"; fi')


def logs_command(name: str, cli: DockerCli, lines: int = 200) -> str:
    return f"{shlex.join(cli.argv('logs', '--tail', str(lines), name))} 2>&1"


def remove_command(name: str, cli: DockerCli) -> str:
    """Stops and removes the server; quiet and successful when it is already gone."""
    return f"{shlex.join(rm_argv([name], cli))} >/dev/null 2>&1 || true"

"""The harness image on this machine: found by tag, or built from vgpu's Dockerfile on a
base image, through the local docker CLI. Also what this machine's containers may be
given (an unlimited memlock needs CAP_SYS_RESOURCE, which some sandboxes drop)."""

from __future__ import annotations

import os
import resource
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from vgpu.container import docker
from vgpu.container.docker import DockerCli
from vgpu.container.images import ImageBuild, write_build_context
from vgpu.errors import RemoteError

CAP_SYS_RESOURCE = 24
BUILD_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class LocalImage:
    tag: str
    image_id: str
    built: bool  # False: it was already there


def memlock_unlimited_allowed() -> bool:
    """Whether containers here may get ``--ulimit memlock=-1``: the hard limit is already
    unlimited or this process has CAP_SYS_RESOURCE (runc otherwise fails with "error
    setting rlimit type 8")."""
    if resource.getrlimit(resource.RLIMIT_MEMLOCK)[1] == resource.RLIM_INFINITY:
        return True
    for line in Path("/proc/self/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> CAP_SYS_RESOURCE & 1)
    return False


def host_ca_bundle() -> Path | None:
    """The CA bundle this machine's pip trusts (it may sit behind a TLS-inspecting proxy),
    handed to the image build so pip inside trusts the same."""
    for candidate in (os.environ.get("PIP_CERT"), os.environ.get("REQUESTS_CA_BUNDLE"),
                      os.environ.get("SSL_CERT_FILE"), "/etc/ssl/certs/ca-certificates.crt"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def build_env() -> dict[str, str]:
    """The classic builder: a docker client may come without the buildx plugin."""
    return {**os.environ, "DOCKER_BUILDKIT": "0"}


def _run(argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              env=build_env(), check=False)
    except FileNotFoundError:
        raise RemoteError(f"{argv[0]} is not installed here: install Docker (and the NVIDIA "
                          "container toolkit for GPUs), or use --runtime host") from None
    except subprocess.TimeoutExpired:
        raise RemoteError(f"`{' '.join(argv[:4])} ...` did not finish in {timeout:.0f} s"
                          ) from None


def image_id(tag: str, cli: DockerCli) -> str | None:
    found = _run(docker.image_id_argv(tag, cli), 120)
    if found.returncode == 0:
        return found.stdout.strip()
    if "No such image" not in found.stderr and "No such object" not in found.stderr:
        raise RemoteError(f"docker cannot be asked about {tag}: {found.stderr.strip()} "
                          "(is the daemon running and reachable, e.g. --docker-host?)")
    return None


def ensure_image(build: ImageBuild, cli: DockerCli) -> LocalImage:
    """``build.tag`` if the daemon has it, else built FROM ``build.base_image``."""
    existing = image_id(build.tag, cli)
    if existing:
        return LocalImage(build.tag, existing, built=False)
    with tempfile.TemporaryDirectory(prefix="vgpu-image-") as folder:
        context = write_build_context(Path(folder), pip_ca_bundle=host_ca_bundle())
        done = _run(docker.build_argv(build, context, cli), BUILD_TIMEOUT_S)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-8:])
        raise RemoteError(f"building the harness image {build.tag} FROM {build.base_image} "
                          f"failed:\n{tail}")
    built = image_id(build.tag, cli)
    if not built:
        raise RemoteError(f"{build.tag} is missing right after docker build")
    return LocalImage(build.tag, built, built=True)

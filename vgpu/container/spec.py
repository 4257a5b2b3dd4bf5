"""One harness instance in a container: what to run, on which device, with which labels.

Pure values: nothing here touches a container runtime. ``vgpu.container.docker`` and
``vgpu.container.apptainer`` turn a ContainerSpec into argv lists.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

HARNESS_PYTHON = "/opt/harness/bin/python"
"""The harness interpreter in the image (a venv; works on NGC and Debian bases alike)."""
WORK_MOUNT = "/work"
"""Where the host work dir is mounted inside the container."""
CACHE_MOUNT = "/cache"
"""Where a host model cache is mounted; the harness finds it through CACHE_ENV."""
CACHE_ENV = "VGPU_HARNESS_CACHE"
RUN_LABEL = "vgpu.run"
INSTANCE_LABEL = "vgpu.instance"
SYNC_STDIN = "stdin"

_NAME_BAD = re.compile(r"[^a-zA-Z0-9_.-]+")
_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def container_name(run_id: str, instance: str) -> str:
    """A docker container name unique per run and instance: ``vgpu-<run>-<instance>``;
    where characters docker does not allow had to be replaced by ``-``, a short hash of
    the original pair keeps distinct pairs distinct."""
    if not run_id or not instance:
        raise ValueError("run_id and instance must not be empty")
    raw = f"vgpu-{run_id}-{instance}"
    name = _NAME_BAD.sub("-", raw)
    if name == raw:
        return name
    digest = hashlib.sha256(f"{run_id}\0{instance}".encode()).hexdigest()[:8]
    return f"{name}-{digest}"


def in_container(relative: str | PurePosixPath) -> str:
    """The container path of ``relative`` (a path inside the work dir)."""
    rel = PurePosixPath(relative)
    if rel.is_absolute() or ".." in rel.parts:
        raise ValueError(f"{relative!s} must be a relative path inside the work dir")
    return str(PurePosixPath(WORK_MOUNT) / rel)


def harness_run_command(spec: str | PurePosixPath, out: str | PurePosixPath,
                        sync: str | None = SYNC_STDIN) -> tuple[str, ...]:
    """``loadgen`` arguments for ``run``: ``spec`` and ``out`` are relative to the work dir."""
    command = ("run", in_container(spec), "--out", in_container(out))
    return (*command, "--sync", sync) if sync else command


def _check_devices(devices: Sequence[str]) -> None:
    for device in devices:
        if not device or any(c in device for c in ',"\' '):
            raise ValueError(f"bad device id {device!r}: give a GPU or MIG UUID")


@dataclass(frozen=True)
class ContainerSpec:
    """One harness instance.

    ``image``: a docker image reference (for apptainer: a .sif path or URI).
    ``command``: the arguments after ``python -m loadgen`` (see harness_run_command).
    ``devices``: GPU or MIG UUIDs the container gets; empty: no GPU (a CPU run).
    ``work_dir``: the host folder mounted at /work (spec in, results out).
    """

    image: str
    run_id: str
    instance: str
    work_dir: Path
    command: tuple[str, ...]
    devices: tuple[str, ...] = ()
    cpus: float | None = None
    interactive: bool = True
    env: Mapping[str, str] = field(default_factory=dict)
    user: str | None = None
    init: bool = True
    ipc_host: bool = True
    network: str | None = "host"
    memlock_unlimited: bool = True
    extra_labels: Mapping[str, str] = field(default_factory=dict)
    cache_dir: Path | None = None  # host folder mounted at CACHE_MOUNT (model cache)

    def __post_init__(self) -> None:
        container_name(self.run_id, self.instance)
        _check_devices(self.devices)
        if self.cpus is not None and self.cpus <= 0:
            raise ValueError(f"cpus must be > 0, got {self.cpus}")
        if not self.command:
            raise ValueError("command must not be empty")
        bad = [key for key in self.env if not _ENV_KEY.match(key)]
        if bad:
            raise ValueError(f"bad environment variable names: {', '.join(bad)}")

    def mount_args(self) -> list[tuple[str, str]]:
        """(host path, container path) of every mount: the work dir, and the cache."""
        mounts = [(str(self.work_dir), WORK_MOUNT)]
        if self.cache_dir is not None:
            mounts.append((str(self.cache_dir), CACHE_MOUNT))
        return mounts

    def environment(self) -> dict[str, str]:
        """``env`` plus what the harness needs to find the mounted cache (and a HOME it
        may write to when it runs as a user the image does not know)."""
        extra = {CACHE_ENV: CACHE_MOUNT} if self.cache_dir is not None else {}
        if self.user:
            extra["HOME"] = WORK_MOUNT
        return {**extra, **self.env}

    @property
    def name(self) -> str:
        return container_name(self.run_id, self.instance)

    @property
    def labels(self) -> dict[str, str]:
        return {**self.extra_labels, RUN_LABEL: self.run_id, INSTANCE_LABEL: self.instance}

    def python_argv(self) -> list[str]:
        """The command inside the container: the harness interpreter running loadgen."""
        return [HARNESS_PYTHON, "-m", "loadgen", *self.command]

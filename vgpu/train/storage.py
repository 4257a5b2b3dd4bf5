"""Where a file-fed run's dataset lives, for the platform record: the filesystem that holds
the path (its kind and mount, from the node's /proc/mounts), or the server of a URL.

The dataset of a local run: the scenario's path when it holds a dataset here, else the one
vgpu makes (once) in its cache folder."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from vgpu.train.launch import TrainNode, run_bash

NETWORK_FILESYSTEMS = {"nfs": "nfs", "nfs4": "nfs", "cifs": "smb", "smb3": "smb",
                       "ceph": "cephfs", "glusterfs": "glusterfs", "lustre": "lustre",
                       "fuse.sshfs": "sshfs", "9p": "9p", "virtiofs": "virtiofs"}
MEMORY_FILESYSTEMS = {"tmpfs", "ramfs"}


@dataclass(frozen=True)
class Storage:
    kind: str  # e.g. "local disk (ext4)", "nfs", "http", "loop device (ext4)"
    mount: str  # "<device> on <mount point> type <fstype>", or the URL's server


def _unescape(field: str) -> str:
    """/proc/mounts writes space, tab, newline and backslash as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def storage_kind(device: str, fstype: str) -> str:
    if fstype in NETWORK_FILESYSTEMS:
        return NETWORK_FILESYSTEMS[fstype]
    if fstype in MEMORY_FILESYSTEMS:
        return f"memory ({fstype})"
    if device.startswith("/dev/loop"):
        return f"loop device ({fstype})"
    if device.startswith("/dev/"):
        return f"local disk ({fstype})"
    return fstype


def storage_of(path: str, mounts: str) -> Storage:
    """The filesystem of the mount point that holds ``path`` (already resolved), read from
    the text of /proc/mounts: the longest mount point above it (the last one mounted wins)."""
    if path.startswith(("http://", "https://")):
        return Storage("http", urlparse(path).netloc)
    best: tuple[int, str, str, str] | None = None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        device, point, fstype = _unescape(fields[0]), _unescape(fields[1]), fields[2]
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= best[0]):
            best = (len(point), device, point, fstype)
    if best is None:
        return Storage("unknown", f"no mount in /proc/mounts holds {path}")
    _, device, point, fstype = best
    return Storage(storage_kind(device, fstype), f"{device} on {point} type {fstype}")


def local_storage(path: str) -> Storage:
    if path.startswith(("http://", "https://")):
        return storage_of(path, "")
    try:
        mounts = Path("/proc/mounts").read_text()
    except OSError as exc:
        return Storage("unknown", f"/proc/mounts unreadable: {exc.strerror}")
    return storage_of(os.path.realpath(path), mounts)


def node_storage(node: TrainNode, path: str) -> Storage:
    """The storage of ``path`` as the node sees it (its own /proc/mounts)."""
    if path.startswith(("http://", "https://")):
        return storage_of(path, "")
    done = run_bash(node, f"readlink -f {shlex.quote(path)}; echo ---; cat /proc/mounts",
                    timeout=60)
    resolved, _, mounts = done.stdout.partition("---\n")
    if done.exit_code != 0 or not resolved.strip():
        return Storage("unknown", f"{node.name}: cannot read /proc/mounts "
                                  f"(exit {done.exit_code})")
    return storage_of(resolved.strip(), mounts)

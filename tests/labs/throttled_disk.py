"""A real disk whose reads are throttled: an ext4 filesystem on a loop device, mounted in a
scratch folder, and a cgroup-v1 blkio group whose ``blkio.throttle.read_bps_device`` caps
the bytes per second that its processes read from that device. A process started through
``command_prefix`` (and every process it forks) reads the disk at that rate once the page
cache holds none of the file (posix_fadvise DONTNEED or drop_caches before each read).

The closest throttled storage path this machine has: its kernel has no NFS client or
server (no nfs in /proc/filesystems, no nfsd), so a kernel NFS mount cannot be made here.
Needs root, losetup, mkfs.ext4 and the blkio controller of cgroup v1.

    with ThrottledDisk(64) as disk:
        disk.set_read_bps(4_000_000)
        subprocess.run([*disk.command_prefix, "cat", str(disk.mount / "f")])
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path
from types import TracebackType

BLKIO = Path("/sys/fs/cgroup/blkio")


def throttled_disk_available() -> str | None:
    """None when a throttled disk can be made here, else why not (for pytest.skip)."""
    if os.geteuid() != 0:
        return "a throttled disk needs root (loop device, mount, cgroup)"
    for tool in ("losetup", "mkfs.ext4", "mount", "umount"):
        if shutil.which(tool) is None:
            return f"{tool} is missing (util-linux / e2fsprogs)"
    if not (BLKIO / "blkio.throttle.read_bps_device").exists():
        return "no cgroup-v1 blkio controller with throttling at /sys/fs/cgroup/blkio"
    return None


def _run(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout.strip()


class ThrottledDisk:
    """Context manager: a ``size_mb`` ext4 loop disk at ``mount`` and its blkio group."""

    def __init__(self, size_mb: int) -> None:
        self.size_mb = size_mb
        self.workdir = Path(tempfile.mkdtemp(prefix="vgpu-disk-"))
        self.image = self.workdir / "disk.img"
        self.mount = self.workdir / "mnt"
        self.group = BLKIO / f"vgpu-test-{uuid.uuid4().hex[:8]}"
        self.device = ""

    def __enter__(self) -> ThrottledDisk:
        reason = throttled_disk_available()
        if reason:
            raise RuntimeError(reason)
        try:
            with self.image.open("wb") as handle:
                handle.truncate(self.size_mb * 1024 * 1024)
            self.device = _run("losetup", "--find", "--show", str(self.image))
            _run("mkfs.ext4", "-q", "-F", self.device)
            self.mount.mkdir()
            _run("mount", self.device, str(self.mount))
            self.group.mkdir()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def major_minor(self) -> str:
        rdev = os.stat(self.device).st_rdev
        return f"{os.major(rdev)}:{os.minor(rdev)}"

    def set_read_bps(self, bytes_per_s: int) -> None:
        (self.group / "blkio.throttle.read_bps_device").write_text(
            f"{self.major_minor} {bytes_per_s}\n")

    @property
    def command_prefix(self) -> list[str]:
        """Prepend to a command to run it (and its children) in the throttled group."""
        procs = self.group / "cgroup.procs"
        return ["sh", "-c", f'echo $$ > {procs} && exec "$@"', "sh"]

    def close(self) -> None:
        if self.group.exists():
            for member in (self.group / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):  # it may have exited meanwhile
                    (BLKIO / "cgroup.procs").write_text(member)
            with contextlib.suppress(OSError):
                self.group.rmdir()
        if self.mount.is_mount():
            subprocess.run(["umount", str(self.mount)], capture_output=True, check=False)
        if self.device:
            subprocess.run(["losetup", "-d", self.device], capture_output=True, check=False)
            self.device = ""
        shutil.rmtree(self.workdir, ignore_errors=True)

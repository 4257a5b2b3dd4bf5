"""The simulator lab's Docker daemon: a real ``dockerd`` on this machine that every
guest's ``docker`` forwards to (guest_tools/docker), so provisioning really builds the
harness image and every harness instance really runs in its own container, as on a lab
VM. What stays simulated is the GPU: a guest's ``--gpus`` is checked against its simulated
NVIDIA runtime and then dropped, and the image carries ONNX Runtime's CPU build.

The daemon keeps its images under ``<cache>/sim-docker`` (base and harness images are made
once per machine and reused by later labs); its socket, exec root and containers go with
`vgpu sim down`. The base image is Debian (debootstrap, the only OS source reachable
offline), standing in for the NGC image a real guest builds FROM.

The same functions start the private daemon of the test suite's docker lab."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from vgpu.container import docker as dk
from vgpu.runpaths import cache_dir

BASE_TAG = "vgpu-sim-base:bookworm"
DEBIAN_SUITE = "bookworm"
BASE_PACKAGES = ("python3", "python3-venv", "python3-pip")
GUEST_LABEL = "vgpu.sim.guest"  # on every container a guest starts (value: the guest's VM)
READY_DEADLINE_S = 60.0
BASE_BUILD_TIMEOUT_S = 900.0
REQUIRED = ("dockerd", "docker", "debootstrap")


def data_root() -> Path:
    return cache_dir() / "sim-docker"


def missing() -> str | None:
    """None when this machine can run the lab's daemon, else what it lacks."""
    if os.geteuid() != 0:
        return "root (dockerd)"
    absent = [tool for tool in REQUIRED if shutil.which(tool) is None]
    if absent:
        return f"{', '.join(absent)} (apt-get install docker.io debootstrap)"
    return None


def storage_drivers() -> list[str]:
    forced = os.environ.get("VGPU_DOCKER_STORAGE_DRIVER")
    if forced:
        return [forced]
    filesystems = Path("/proc/filesystems").read_text(encoding="utf-8")
    return ["overlay2", "vfs"] if "overlay" in filesystems else ["vfs"]


def tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


@dataclass(frozen=True)
class LabDaemon:
    """A running daemon: its pid, socket and exec root (both under /tmp, removed at stop)."""

    pid: int
    exec_dir: str
    storage_driver: str
    root: str

    @property
    def socket(self) -> Path:
        return Path(self.exec_dir) / "docker.sock"

    @property
    def build_lock(self) -> Path:
        """Held by a guest's `docker build` (flock), readable by the guests' login."""
        return Path(self.exec_dir) / "build.lock"

    @property
    def host(self) -> str:
        return f"unix://{self.socket}"

    @property
    def cli(self) -> dk.DockerCli:
        return dk.DockerCli(host=self.host)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def daemon_argv(root: Path, exec_dir: Path, driver: str, group: str | None) -> list[str]:
    """No iptables, no bridge: containers use the host network, as the harness does."""
    argv = ["dockerd", "--iptables=false", "--ip-masq=false", "--bridge=none",
            f"--storage-driver={driver}", f"--data-root={root / 'data'}",
            f"--exec-root={exec_dir / 'x'}", "-H", f"unix://{exec_dir / 'docker.sock'}",
            f"--pidfile={root / 'dockerd.pid'}"]
    return [*argv, f"--group={group}"] if group else argv


def wait_ready(process: subprocess.Popen[bytes], cli: dk.DockerCli) -> bool:
    deadline = time.monotonic() + READY_DEADLINE_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        done = subprocess.run(dk.version_argv(cli), capture_output=True, check=False,
                              timeout=10)
        if done.returncode == 0:
            return True
        time.sleep(0.1)
    return False


def start(root: Path | None = None, group: str | None = None,
          detach: bool = True) -> tuple[LabDaemon, subprocess.Popen[bytes]]:
    """Start a daemon on ``root`` (storage driver overlay2 where the kernel has it, else
    vfs). ``group`` owns its socket (mode 660); the exec root is traversable so members of
    that group reach it. RuntimeError with the daemon's log when it does not start."""
    root = root or data_root()
    root.mkdir(parents=True, exist_ok=True)
    stop_stale(root)
    exec_dir = Path(tempfile.mkdtemp(prefix="vd", dir="/tmp"))
    exec_dir.chmod(0o711)
    log_path = root / "dockerd.log"
    errors = []
    for driver in storage_drivers():
        with log_path.open("wb") as log:
            process = subprocess.Popen(daemon_argv(root, exec_dir, driver, group), stdout=log,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       start_new_session=detach)
        daemon = LabDaemon(pid=process.pid, exec_dir=str(exec_dir), storage_driver=driver,
                           root=str(root))
        if wait_ready(process, daemon.cli):
            daemon.build_lock.touch(mode=0o644)
            return daemon, process
        terminate(process.pid)
        errors.append(f"--storage-driver={driver}:\n{tail(log_path)}")
    remove_exec_dir(exec_dir)
    raise RuntimeError("dockerd did not start:\n" + "\n".join(errors))


def stop_stale(root: Path) -> None:
    """A daemon on ``root`` whose owner died: stopped by the pid in its pidfile."""
    pidfile = root / "dockerd.pid"
    with contextlib.suppress(FileNotFoundError, ValueError):
        pid = int(pidfile.read_text(encoding="utf-8").strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        if b"dockerd" in cmdline and str(root).encode() in cmdline:
            terminate(pid)
    pidfile.unlink(missing_ok=True)


def terminate(pid: int, grace_s: float = 30.0) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, 15)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            os.kill(pid, 0)
            time.sleep(0.1)
        os.kill(pid, 9)


def stop(daemon: LabDaemon) -> None:
    """The guests' containers, then the daemon, then its socket and exec root."""
    remove_guest_containers(daemon)
    terminate(daemon.pid)
    remove_exec_dir(Path(daemon.exec_dir))
    (Path(daemon.root) / "dockerd.pid").unlink(missing_ok=True)


def guest_containers(daemon: LabDaemon) -> list[str]:
    done = subprocess.run(daemon.cli.argv("ps", "-aq", "--filter", f"label={GUEST_LABEL}"),
                          capture_output=True, text=True, check=False, timeout=60)
    return dk.output_lines(done.stdout) if done.returncode == 0 else []


def remove_guest_containers(daemon: LabDaemon) -> None:
    names = guest_containers(daemon)
    if names:
        subprocess.run(dk.rm_argv(names, daemon.cli), capture_output=True, check=False,
                       timeout=120)


def _mounts_under(folder: Path) -> list[str]:
    prefix = f"{folder}/"
    points = [line.split()[4] for line in
              Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines()]
    return sorted((p for p in points if p.startswith(prefix)), key=len, reverse=True)


def remove_exec_dir(folder: Path) -> None:
    """Removes dockerd's exec root, unmounting what it leaves behind (netns/default)."""
    for point in _mounts_under(folder):
        subprocess.run(["umount", point], capture_output=True, check=False, timeout=30)
    shutil.rmtree(folder, ignore_errors=True)


def image_id(image: str, cli: dk.DockerCli) -> str | None:
    done = subprocess.run(dk.image_id_argv(image, cli), capture_output=True, text=True,
                          check=False, timeout=60)
    return done.stdout.strip() if done.returncode == 0 else None


def rootfs_archive() -> Path:
    """Where the debootstrapped root filesystem is kept as a tar, so every daemon on this
    machine (the lab's, the test suite's) imports the same one instead of making it again."""
    return cache_dir() / "rootfs" / f"debian-{DEBIAN_SUITE}-{'-'.join(BASE_PACKAGES)}.tar"


def ensure_base_image(cli: dk.DockerCli, work_dir: Path, tag: str = BASE_TAG,
                      say: Callable[[str], None] | None = None) -> tuple[str, bool]:
    """The base image's ID (imported from this machine's root filesystem archive, made with
    debootstrap the first time), and whether it was made now."""
    existing = image_id(tag, cli)
    if existing:
        return existing, False
    archive = rootfs_archive()
    if not archive.exists():
        if say is not None:
            say(f"making the base image {tag} (Debian {DEBIAN_SUITE} with debootstrap; once "
                "per machine, about a minute)")
        make_rootfs_archive(archive, work_dir)
    import_archive(archive, cli, tag)
    made = image_id(tag, cli)
    if not made:
        raise RuntimeError(f"{tag} is missing after docker import")
    return made, True


def make_rootfs_archive(archive: Path, work_dir: Path) -> None:
    work_dir.mkdir(parents=True, exist_ok=True)
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="vgpu-rootfs-", dir=work_dir) as tmp:
        rootfs = Path(tmp) / "rootfs"
        debootstrap(rootfs, Path(tmp) / "debootstrap.log")
        partial = archive.with_name(f".{archive.name}.{os.getpid()}")
        done = subprocess.run(["tar", "-C", str(rootfs), "-cf", str(partial), "."],
                              capture_output=True, text=True, check=False, timeout=600)
        if done.returncode != 0:
            partial.unlink(missing_ok=True)
            raise RuntimeError(f"tar of the root filesystem failed: {done.stderr.strip()}")
        partial.replace(archive)  # whole or absent, even for a daemon started meanwhile


def import_archive(archive: Path, cli: dk.DockerCli, tag: str) -> None:
    with archive.open("rb") as data:
        done = subprocess.run(cli.argv("import", "-", tag), stdin=data, capture_output=True,
                              text=True, check=False, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"docker import of {archive} failed ({done.returncode}): "
                           f"{done.stderr.strip()}")


def debootstrap(rootfs: Path, log: Path) -> None:
    argv = ["debootstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}",
            DEBIAN_SUITE, str(rootfs)]
    with log.open("wb") as out:
        done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=False,
                              timeout=BASE_BUILD_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"debootstrap failed ({done.returncode}):\n{tail(log, 30)}")


def leftovers(root: Path | None = None) -> list[str]:
    """A daemon on the lab's data root still running, or its containers' exec roots."""
    root = root or data_root()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                if argv and argv[0].endswith(b"dockerd") and \
                        f"--data-root={root / 'data'}".encode() in argv:
                    found.append(f"process dockerd (pid {entry.name})")
    return found

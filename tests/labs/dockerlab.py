"""A private Docker daemon for tests, with the harness image built in it.

``DockerLab`` starts its own ``dockerd`` (no iptables, no bridge) whose data root is cached
per machine under ``~/.cache/vgpu/docker`` (or ``$VGPU_CACHE_DIR/docker``), so images and
build layers survive between test sessions; its exec root and socket live under a short
/tmp path and are removed at the end. Readiness is polled with ``docker version`` under a
deadline. Then, once per machine, the base image ``vgpu-test-base:bookworm`` is made with
debootstrap (Debian minbase + python3, python3-venv, python3-pip) and ``docker import``;
the harness image is built from vgpu's Dockerfile on top of it with the CPU onnxruntime,
reusing docker's layer cache.

    with DockerLab() as lab:
        lab.docker("ps")                      # CompletedProcess of `docker -H ... ps`
        lab.build_harness()                   # BuildResult(tag, image_id, seconds, log)

Tests use the ``docker_lab`` session fixture (import it into a conftest). Needs root,
docker.io and debootstrap (``bash scripts/setup.sh --test``); without them tests skip
with a reason starting "docker lab:". Storage driver: overlay2 where the kernel has it,
else vfs (``$VGPU_DOCKER_STORAGE_DRIVER`` forces one).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO

import pytest

from vgpu.container import docker as dk
from vgpu.container.images import ImageBuild, write_build_context
from vgpu.container.local import build_env, host_ca_bundle
from vgpu.sim import dockerd as sim_dockerd

BASE_TAG = "vgpu-test-base:bookworm"
HARNESS_TAG = "vgpu-harness:test"
READY_DEADLINE_S = 60.0
LOCK_DEADLINE_S = 900.0
HARNESS_BUILD_TIMEOUT_S = 1800.0
SKIP_PREFIX = "docker lab: "


def cache_root() -> Path:
    base = os.environ.get("VGPU_CACHE_DIR")
    root = Path(base) if base else Path.home() / ".cache" / "vgpu"
    return root / "docker"


def lab_available() -> str | None:
    """None when this machine can run the lab, else the reason (for pytest.skip)."""
    if os.geteuid() != 0:
        return "dockerd needs root"
    for tool in ("dockerd", "docker", "debootstrap"):
        if shutil.which(tool) is None:
            return f"{tool} is missing: run `bash scripts/setup.sh --test` (docker.io, " \
                   "debootstrap)"
    return None


@dataclass(frozen=True)
class BuildResult:
    tag: str
    image_id: str
    seconds: float
    log: str


@dataclass
class Timings:
    """Seconds each lab step took in this session (None: not done, e.g. cached)."""

    dockerd_start: float | None = None
    base_image: float | None = None
    harness_builds: list[float] = field(default_factory=list)


class DockerLab:
    """A running private dockerd; a context manager that stops it by pid."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or cache_root()
        self.timings = Timings()
        self.storage_driver: str | None = None
        self._lock: IO[str] | None = None
        self._exec_dir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    # ---- daemon lifecycle
    def __enter__(self) -> DockerLab:
        self.root.mkdir(parents=True, exist_ok=True)
        self._acquire_lock()
        try:
            self._stop_stale_daemon()
            self._start_daemon()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            self._stop_daemon()
        finally:
            if self._exec_dir is not None:
                sim_dockerd.remove_exec_dir(self._exec_dir)
                self._exec_dir = None
            if self._lock is not None:
                self._lock.close()
                self._lock = None

    @property
    def pidfile(self) -> Path:
        return self.root / "dockerd.pid"

    @property
    def log_path(self) -> Path:
        return self.root / "dockerd.log"

    @property
    def socket(self) -> Path:
        assert self._exec_dir is not None, "use DockerLab as a context manager"
        return self._exec_dir / "docker.sock"

    @property
    def cli(self) -> dk.DockerCli:
        return dk.DockerCli(host=f"unix://{self.socket}")

    def _acquire_lock(self) -> None:
        """One session per data root: a second one waits, bounded, for the first."""
        self._lock = (self.root / "lock").open("a+", encoding="utf-8")
        deadline = time.monotonic() + LOCK_DEADLINE_S
        while True:
            try:
                fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.root}/lock is held by another test session "
                                       f"for more than {LOCK_DEADLINE_S:.0f} s") from None
                time.sleep(0.5)

    def _stop_stale_daemon(self) -> None:
        """A dockerd this lab started in a session that died (we hold the lock, so no live
        session owns it): stop it by the pid in its pidfile."""
        sim_dockerd.stop_stale(self.root)

    def _start_daemon(self) -> None:
        errors = []
        for driver in sim_dockerd.storage_drivers():
            started = time.monotonic()
            if self._try_start(driver):
                self.storage_driver = driver
                self.timings.dockerd_start = time.monotonic() - started
                return
            errors.append(f"--storage-driver={driver}:\n{sim_dockerd.tail(self.log_path)}")
        raise RuntimeError("dockerd did not start:\n" + "\n".join(errors))

    def _try_start(self, driver: str) -> bool:
        if self._exec_dir is None:
            self._exec_dir = Path(tempfile.mkdtemp(prefix="vd", dir="/tmp"))
        argv = sim_dockerd.daemon_argv(self.root, self._exec_dir, driver, group=None)
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL)
        if sim_dockerd.wait_ready(self._process, self.cli):
            return True
        self._stop_daemon()
        return False

    def _stop_daemon(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        self.pidfile.unlink(missing_ok=True)

    # ---- docker commands
    def docker(self, *args: str, timeout: float = 120, check: bool = True,
               input_text: str | None = None) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(self.cli.argv(*args), capture_output=True, text=True,
                              timeout=timeout, input=input_text, check=False, env=build_env())
        if check and done.returncode != 0:
            raise RuntimeError(f"docker {' '.join(args)} failed ({done.returncode}):\n"
                               f"{done.stderr.strip()}")
        return done

    def image_id(self, image: str) -> str | None:
        return sim_dockerd.image_id(image, self.cli)

    def ensure_base_image(self) -> str:
        """The base image's ID, made with debootstrap the first time on this machine."""
        started = time.monotonic()
        image, made = sim_dockerd.ensure_base_image(self.cli, self.root, BASE_TAG)
        if made:
            self.timings.base_image = time.monotonic() - started
        return image

    def build_harness(self, tag: str = HARNESS_TAG, **overrides: object) -> BuildResult:
        """Builds the harness image from the project's Dockerfile on the base image."""
        self.ensure_base_image()
        values: dict[str, object] = {"tag": tag, "base_image": BASE_TAG,
                                     "ort_package": "onnxruntime", "network": "host"}
        values.update(overrides)
        build = ImageBuild(**values)  # type: ignore[arg-type]
        with tempfile.TemporaryDirectory(prefix="vgpu-build-") as tmp:
            context = write_build_context(Path(tmp) / "context", host_ca_bundle())
            started = time.monotonic()
            done = subprocess.run(dk.build_argv(build, context, self.cli), capture_output=True,
                                  text=True, timeout=HARNESS_BUILD_TIMEOUT_S, check=False,
                                  env=build_env())
            seconds = time.monotonic() - started
        log = done.stdout + done.stderr
        if done.returncode != 0:
            raise RuntimeError(f"docker build of {tag} failed ({done.returncode}):\n{log[-4000:]}")
        self.timings.harness_builds.append(seconds)
        image = self.image_id(tag)
        assert image, f"{tag} is missing after docker build"
        return BuildResult(tag, image, seconds, log)


@dataclass(frozen=True)
class HarnessLab:
    """What the docker_lab fixture gives a test: the daemon and the built harness image."""

    lab: DockerLab
    image: BuildResult


@pytest.fixture(scope="session")
def docker_lab() -> Iterator[HarnessLab]:
    """A private dockerd with the harness image (CPU onnxruntime) built, for the session."""
    reason = lab_available()
    if reason:
        pytest.skip(SKIP_PREFIX + reason)
    with DockerLab() as lab:
        yield HarnessLab(lab, lab.build_harness())


@pytest.fixture
def daemon(docker_lab: HarnessLab) -> Iterator[str]:
    """The lab daemon's address, its socket opened to every local user meanwhile."""
    socket = docker_lab.lab.socket
    modes = [(path, path.stat().st_mode & 0o7777) for path in (socket.parent, socket)]
    socket.parent.chmod(0o711)
    socket.chmod(0o666)
    try:
        yield f"unix://{socket}"
    finally:
        for path, mode in modes:
            path.chmod(mode)


def main() -> int:
    """``python -m tests.labs.dockerlab``: make the cached images ahead of a test run."""
    reason = lab_available()
    if reason:
        print(SKIP_PREFIX + reason)
        return 1
    with DockerLab() as lab:
        built = lab.build_harness()
        print(f"dockerd ({lab.storage_driver}) ready in {lab.timings.dockerd_start:.2f} s; "
              f"base image: {lab.timings.base_image}; {built.tag} {built.image_id} built in "
              f"{built.seconds:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

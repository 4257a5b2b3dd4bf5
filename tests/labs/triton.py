"""A real Triton Inference Server for tests: the tritonserver binary from the
nvidia-pytriton wheel in ``.venv-triton`` (created by ``scripts/setup.sh --test``).

    from tests.labs.triton import TritonServer

    with TritonServer(repository) as server:
        server.grpc_url, server.http_url     # "127.0.0.1:PORT"
        server.kill()                        # SIGKILL, e.g. to fail a run on purpose

The server runs on free loopback ports with its log in the repository's parent folder
(``server.log_path``). Before the first start the python backend stub for this Python
version is copied into the server's backends/python folder (the wheel ships it apart).
``triton_unavailable()`` says why a test must skip, or None.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

ROOT = Path(__file__).resolve().parents[2]
# scripts/test.sh --latest points this at .venv-triton-latest
TRITON_VENV = Path(os.environ.get("VGPU_TRITON_VENV") or ROOT / ".venv-triton")
PY_VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"
STUB = "triton_python_backend_stub"


def _site_packages(venv: Path) -> Path:
    return venv / "lib" / f"python{PY_VERSION}" / "site-packages"


def triton_unavailable(venv: Path = TRITON_VENV) -> str | None:
    """Why Triton tests must skip: only when the environment is absent. A present but
    broken one fails at ``start()`` instead, so CI never skips silently."""
    if not venv.is_dir():
        return (f"{venv} is absent: run `bash scripts/setup.sh --test` to create it with "
                f"nvidia-pytriton")
    return None


def _server_binary(venv: Path) -> Path:
    return _site_packages(venv) / "pytriton" / "tritonserver" / "bin" / "tritonserver"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class TritonServer:
    def __init__(self, repository: Path, venv: Path = TRITON_VENV,
                 extra_args: list[str] | None = None) -> None:
        self.repository = Path(repository)
        self.venv = venv
        self.site = _site_packages(venv)
        self.home = self.site / "pytriton" / "tritonserver"
        self.extra_args = extra_args or []
        self.http_port, self.grpc_port, self.metrics_port = free_port(), free_port(), free_port()
        self.log_path = self.repository.parent / f"tritonserver-{self.http_port}.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def http_url(self) -> str:
        return f"127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def _install_stub(self) -> None:
        target = self.home / "backends" / "python" / STUB
        if not target.exists():
            # Copy then rename: another test session may be starting a server right now.
            partial = target.with_name(f"{STUB}.{os.getpid()}.tmp")
            shutil.copy2(self.home / "python_backend_stubs" / PY_VERSION / STUB, partial)
            os.replace(partial, target)

    def start(self, timeout_s: float = 90.0) -> TritonServer:
        if not _server_binary(self.venv).exists():
            raise RuntimeError(f"no Triton server at {_server_binary(self.venv)}: run "
                               f"`bash scripts/setup.sh --test`")
        self._install_stub()
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = str(self.site / "nvidia_pytriton.libs")
        # The python backend stub runs the interpreter found first on PATH.
        env["PATH"] = f"{self.venv / 'bin'}:{env.get('PATH', '')}"
        command = [
            str(_server_binary(self.venv)),
            f"--model-repository={self.repository}",
            f"--backend-directory={self.home / 'backends'}",
            f"--http-port={self.http_port}", f"--grpc-port={self.grpc_port}",
            f"--metrics-port={self.metrics_port}", "--http-address=127.0.0.1",
            "--grpc-address=127.0.0.1", "--allow-metrics=false", *self.extra_args,
        ]
        log = self.log_path.open("wb")
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                        start_new_session=True)
        log.close()
        self._wait_ready(timeout_s)
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        url = f"http://{self.http_url}/v2/health/ready"
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"tritonserver exited with {self.process.returncode}:\n"
                                   f"{self.log_tail()}")
            with (contextlib.suppress(urllib.error.URLError, ConnectionError, TimeoutError),
                  urllib.request.urlopen(url, timeout=1) as response):
                if response.status == 200:
                    return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"tritonserver not ready after {timeout_s}s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def kill(self) -> None:
        """SIGKILL the server and its python backend stubs (its process group)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.kill()

    def __enter__(self) -> TritonServer:
        return self.start() if self.process is None else self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

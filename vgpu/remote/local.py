"""LocalTransport: the Transport as subprocesses on this machine (same interface as SSH)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from vgpu.remote.errors import CommandTimeout
from vgpu.remote.hostlog import HostLog
from vgpu.remote.transport import (
    CommandResult,
    RemoteProcess,
    SudoSettings,
    Transport,
    temp_path_for,
)


class LocalTransport(Transport):
    """Commands run in ``sh -c`` with the user's home as working directory, like an SSH
    session, so relative paths mean the same thing on both transports."""

    def __init__(self, name: str = "localhost", sudo: SudoSettings | None = None,
                 log: HostLog | None = None, home: Path | None = None) -> None:
        from vgpu.remote.redact import Redactor

        super().__init__(name, sudo or SudoSettings(), log or HostLog(None, Redactor()))
        self.home = home or Path.home()

    def _resolve(self, path: str) -> Path:
        if path.startswith("~/"):
            return self.home / path[2:]
        return Path(path) if path.startswith("/") else self.home / path

    def _execute(self, command: str, stdin: bytes | None, timeout: float | None) -> CommandResult:
        started = time.monotonic()
        process = subprocess.Popen(
            ["sh", "-c", command], cwd=self.home, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )
        try:
            out, err = process.communicate(stdin or b"", timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise CommandTimeout(self.name, f"`{self.redactor.redact(command)}` still running "
                                 f"after {timeout}s; killed", "raise the timeout") from None
        text_out, text_err = out.decode(errors="replace"), err.decode(errors="replace")
        for label, text in (("out", text_out), ("err", text_err)):
            if text:
                self.log.stream(label, text)
        self.log.flush_stream()
        return CommandResult(command, process.returncode, text_out, text_err,
                             time.monotonic() - started)

    def _write_file(self, data: bytes, remote_path: str, mode: int) -> None:
        path = self._resolve(remote_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = Path(temp_path_for(str(path)))
        temp.write_bytes(data)
        temp.chmod(mode)
        os.replace(temp, path)

    def get(self, remote_path: str, local_path: Path) -> None:
        data = self._resolve(remote_path).read_bytes()
        temp = local_path.with_name(f".{local_path.name}.vgpu-tmp")
        local_path.parent.mkdir(parents=True, exist_ok=True)
        temp.write_bytes(data)
        os.replace(temp, local_path)

    def open_process(self, command: str) -> RemoteProcess:
        process = subprocess.Popen(
            ["sh", "-c", f"exec {command}"], cwd=self.home, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )
        return LocalProcess(self, process)

    def close(self) -> None:
        """Nothing to close: each command is its own subprocess."""


class LocalProcess(RemoteProcess):
    def __init__(self, transport: LocalTransport, process: subprocess.Popen[bytes]) -> None:
        self.transport = transport
        self.process = process
        self._lines: list[bytes | None] = []
        self._stderr = b""
        self._ready = threading.Condition()
        threading.Thread(target=self._pump_stdout, daemon=True).start()
        threading.Thread(target=self._pump_stderr, daemon=True).start()

    def _pump_stdout(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._ready:
                self._lines.append(line)
                self._ready.notify_all()
        with self._ready:
            self._lines.append(None)
            self._ready.notify_all()

    def _pump_stderr(self) -> None:
        assert self.process.stderr is not None
        for chunk in self.process.stderr:
            self._stderr += chunk

    def write_line(self, line: str) -> None:
        assert self.process.stdin is not None
        self.transport.log.line(f"  in| {line}")
        self.process.stdin.write(f"{line}\n".encode())
        self.process.stdin.flush()

    def read_line(self, timeout: float) -> str | None:
        with self._ready:
            if not self._ready.wait_for(lambda: bool(self._lines), timeout):
                raise TimeoutError(f"{self.transport.name}: no output line in {timeout}s")
            raw = self._lines[0]
            if raw is None:
                return None
            self._lines.pop(0)
        text = self.transport.redactor.redact(raw.decode(errors="replace").rstrip("\n"))
        self.transport.log.line(f"  out| {text}")
        return text

    def wait(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"{self.transport.name}: process still running") from None

    def kill(self, grace: float = 3.0) -> None:
        if self.process.poll() is not None:
            return
        # The process leads its own session: signal the group so its children go too.
        self._signal(signal.SIGTERM)
        try:
            self.process.wait(grace)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            self.process.wait()

    def _signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signum)

    @property
    def stderr_text(self) -> str:
        return self.transport.redactor.redact(self._stderr.decode(errors="replace"))

    def close(self) -> None:
        self.kill()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()

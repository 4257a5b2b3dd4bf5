"""The one interface provisioning steps use to reach a host, whatever carries it (SSH or a
local subprocess): run a command, put/get a file atomically, drive a long-running process."""

from __future__ import annotations

import hashlib
import os
import shlex
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from vgpu.remote.errors import AuthError, CommandFailed
from vgpu.remote.hostlog import HostLog
from vgpu.remote.redact import MIN_SECRET_LENGTH, Redactor

STAGING_DIR = ".vgpu/tmp"  # under the login user's home
TEMP_SUFFIX = ".vgpu-tmp"
SUDO_REJECTED = ("Sorry, try again", "incorrect password attempt", "no password was provided")
SUDO_NEEDS_PASSWORD = "a password is required"


@dataclass(frozen=True)
class CommandResult:
    command: str
    exit_code: int
    stdout: str
    stderr: str
    duration: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def tail(self, lines: int = 5) -> str:
        text = (self.stderr.strip() or self.stdout.strip()).splitlines()
        return " | ".join(text[-lines:])


@dataclass(frozen=True)
class SudoSettings:
    """Where the sudo password comes from; neither set means password-less sudo."""

    password_env: str | None = None
    password_file: Path | None = None

    def read_password(self, host: str) -> str | None:
        secret: str | None = None
        if self.password_env:
            secret = os.environ.get(self.password_env)
            if secret is None:
                raise AuthError(
                    host, f"sudo password variable {self.password_env} is not set",
                    f"export {self.password_env}=... or use sudo_password_file",
                )
        elif self.password_file:
            try:
                secret = self.password_file.read_text().rstrip("\n")
            except OSError as exc:
                raise AuthError(
                    host, f"cannot read sudo password file {self.password_file}: {exc.strerror}",
                    "point sudo_password_file at a readable file (mode 600)",
                ) from exc
        if secret is not None and len(secret) < MIN_SECRET_LENGTH:
            raise AuthError(host, "sudo password is too short to be kept out of logs",
                            f"use a password of at least {MIN_SECRET_LENGTH} characters")
        return secret


def quote(path_or_text: str) -> str:
    return shlex.quote(path_or_text)


def temp_path_for(remote_path: str) -> str:
    """The sibling temp name a file is written to before the atomic rename."""
    head, _, name = remote_path.rpartition("/")
    return f"{head}/.{name}{TEMP_SUFFIX}" if head or remote_path.startswith("/") else (
        f".{name}{TEMP_SUFFIX}")


def staging_name(remote_path: str) -> str:
    return f"{STAGING_DIR}/{hashlib.sha256(remote_path.encode()).hexdigest()[:16]}"


class RemoteProcess(ABC):
    """A long-running command with line-oriented stdin/stdout (e.g. a READY / GO protocol)."""

    @abstractmethod
    def write_line(self, line: str) -> None: ...

    @abstractmethod
    def read_line(self, timeout: float) -> str | None:
        """The next stdout line without its newline; None at end of output.
        Raises TimeoutError when no full line arrived in time."""

    @abstractmethod
    def wait(self, timeout: float) -> int:
        """Exit code; raises TimeoutError if still running after ``timeout`` seconds."""

    @abstractmethod
    def kill(self, grace: float = 3.0) -> None:
        """SIGTERM, then SIGKILL after ``grace`` seconds if still running."""

    @property
    @abstractmethod
    def stderr_text(self) -> str: ...

    @abstractmethod
    def close(self) -> None:
        """Release the process's resources; kills it if still running."""


class Transport(ABC):
    """Runs commands on one host. Secrets never reach the log or a CommandResult."""

    name: str
    log: HostLog
    redactor: Redactor

    def __init__(self, name: str, sudo: SudoSettings, log: HostLog) -> None:
        self.name = name
        self.sudo = sudo
        self.log = log
        self.redactor = log.redactor
        self._sudo_password: str | None = None
        self._sudo_password_read = False

    # ---- what subclasses provide ---------------------------------------------------------
    @abstractmethod
    def _execute(self, command: str, stdin: bytes | None, timeout: float | None) -> CommandResult:
        """Run a shell command line as the login user; the output is raw (unredacted)."""

    @abstractmethod
    def _write_file(self, data: bytes, remote_path: str, mode: int) -> None:
        """Write a file the login user may write, via temp file + rename."""

    @abstractmethod
    def get(self, remote_path: str, local_path: Path) -> None:
        """Copy a remote file to ``local_path`` (written to a temp file, then renamed)."""

    @abstractmethod
    def open_process(self, command: str) -> RemoteProcess:
        """Start a long-running command whose stdin/stdout the caller drives."""

    @abstractmethod
    def close(self) -> None: ...

    def reconnect(self) -> None:
        """Re-establish the connection after a loss (no-op where there is none)."""
        return None

    # ---- the interface -------------------------------------------------------------------
    def run(
        self, command: str, timeout: float | None = None, sudo: bool = False,
        stdin: bytes | str | None = None, check: bool = False,
    ) -> CommandResult:
        data = stdin.encode() if isinstance(stdin, str) else stdin
        line, preamble = self._wrap(command, sudo, has_stdin=data is not None)
        self.log.line(f"$ {'sudo ' if sudo else ''}{command}")
        payload = preamble + data if preamble and data else (preamble or data)
        raw = self._execute(line, payload, timeout)
        result = CommandResult(
            command=command, exit_code=raw.exit_code, stdout=self.redactor.redact(raw.stdout),
            stderr=self.redactor.redact(raw.stderr), duration=raw.duration,
        )
        self.log.line(f"  -> exit {result.exit_code} in {result.duration:.2f}s")
        if sudo and self._sudo_password is not None and result.exit_code != 0 and any(
            marker in raw.stderr for marker in SUDO_REJECTED
        ):
            raise AuthError(self.name, "sudo rejected the password",
                            "check the sudo password environment variable or file for this host")
        if sudo and SUDO_NEEDS_PASSWORD in raw.stderr:
            raise AuthError(self.name, "sudo needs a password and none is configured",
                            "set ssh.sudo_password_env or ssh.sudo_password_file in the inventory")
        if check and not result.ok:
            raise CommandFailed(self.name, f"`{command}` exited {result.exit_code}: "
                                f"{result.tail()}")
        return result

    def put(
        self, source: Path | bytes | str, remote_path: str, mode: int = 0o644,
        sudo: bool = False,
    ) -> None:
        """Write a file atomically: a reader sees the old content or the new, never half.
        With ``sudo`` the file is staged in the login user's home and moved into place as
        root (``install`` to a sibling temp name, then ``mv``: a rename in one directory)."""
        data = source.read_bytes() if isinstance(source, Path) else (
            source.encode() if isinstance(source, str) else source)
        self.log.line(f"put {len(data)} bytes -> {remote_path} (mode {mode:o}"
                      f"{', as root' if sudo else ''})")
        if not sudo:
            self._write_file(data, remote_path, mode)
            return
        stage = staging_name(remote_path)
        self._write_file(data, stage, 0o600)
        temp = temp_path_for(remote_path)
        self.run(
            f"install -D -m {mode:o} {stage} {quote(temp)} && mv -f {quote(temp)} "
            f"{quote(remote_path)}; rc=$?; rm -f {stage}; exit $rc",
            sudo=True, check=True,
        )

    # ---- sudo ----------------------------------------------------------------------------
    def _password(self) -> str | None:
        if not self._sudo_password_read:
            self._sudo_password = self.sudo.read_password(self.name)
            if self._sudo_password:
                self.redactor.add(self._sudo_password)
            self._sudo_password_read = True
        return self._sudo_password

    def _wrap(self, command: str, sudo: bool, has_stdin: bool) -> tuple[str, bytes | None]:
        if not sudo:
            return command, None
        password = self._password()
        if password is None:
            return f"sudo -n -- sh -c {quote(command)}", None
        if has_stdin:
            # With -S a rejected password makes sudo read the next stdin line as a new try,
            # which would hand the caller's data to sudo: refuse that combination.
            raise ValueError("stdin data cannot be combined with a sudo password")
        # -k ignores cached credentials, so sudo always reads exactly the password line.
        return f"sudo -k -S -p '' -- sh -c {quote(command)}", f"{password}\n".encode()

"""The one thing the launcher needs from a node: run a shell command, get its exit code and
output. LocalShell runs on this machine; an SSH transport satisfies the same protocol."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class ShellResult:
    exit_code: int
    stdout: str
    stderr: str


class NodeShell(Protocol):
    def run(self, command: str, timeout: float | None = None) -> ShellResult:
        """Run ``command`` with bash; a timeout raises TimeoutError."""
        ...


class LocalShell:
    """Runs commands on this machine, each in its own session so nothing is left behind."""

    def run(self, command: str, timeout: float | None = None) -> ShellResult:
        try:
            done = subprocess.run(
                ["bash", "-c", command], capture_output=True, text=True, timeout=timeout,
                check=False, start_new_session=True,
            )
        except subprocess.TimeoutExpired as exc:
            raise TimeoutError(f"command timed out after {timeout} s: {command[:200]}") from exc
        return ShellResult(done.returncode, done.stdout, done.stderr)

"""The one thing the launcher needs from a node: run a command line, get its exit code and
output. vgpu.provision's transports (LocalTransport here, SSHTransport for VMs and hosts)
satisfy this protocol as they are."""

from __future__ import annotations

from typing import Protocol


class ShellResult(Protocol):
    @property
    def exit_code(self) -> int: ...

    @property
    def stdout(self) -> str: ...

    @property
    def stderr(self) -> str: ...


class NodeShell(Protocol):
    def run(self, command: str, timeout: float | None = None) -> ShellResult:
        """Run ``command``; a timeout raises an exception."""
        ...

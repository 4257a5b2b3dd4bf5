"""Errors raised while reaching or changing a guest. All are RemoteErrors (exit code 1);
each message names the host and says what to do."""

from __future__ import annotations

from vgpu.errors import RemoteError


class ProvisionError(RemoteError):
    """Base for failures on one host."""

    def __init__(self, host: str, message: str, fix: str | None = None) -> None:
        self.host = host
        self.message = message
        self.fix = fix
        super().__init__(str(self))

    def __str__(self) -> str:
        text = f"{self.host}: {self.message}"
        return f"{text} (fix: {self.fix})" if self.fix else text


class HostKeyError(ProvisionError):
    """The host's SSH key is unknown or differs from the one recorded in known_hosts."""


class UnreachableError(ProvisionError):
    """No SSH connection could be made after all retries."""


class AuthError(ProvisionError):
    """The SSH server or sudo refused our credentials."""


class ConnectionLost(ProvisionError):
    """The connection dropped while a command was running; its outcome is unknown."""


class CommandTimeout(ProvisionError):
    """A command ran longer than its timeout and was abandoned."""


class CommandFailed(ProvisionError):
    """A command exited non-zero where success was required."""

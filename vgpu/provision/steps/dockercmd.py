"""Docker on a guest through the transport: the argv lists of vgpu.container as shell lines,
and what docker's output says went wrong (with the fix for it)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from vgpu.remote.transport import CommandResult, quote

CLASSIC_BUILDER = "DOCKER_BUILDKIT=0"
MISSING_IMAGE = ("No such image", "No such object")
TAIL_LINES = 8


def shell(argv: Sequence[str], env: str = "") -> str:
    line = " ".join(quote(arg) for arg in argv)
    return f"{env} {line}" if env else line


def output_tail(result: CommandResult, lines: int = TAIL_LINES) -> str:
    """The last lines of stdout and stderr together (docker build reports on stdout)."""
    text = f"{result.stdout.strip()}\n{result.stderr.strip()}".strip().splitlines()
    return " | ".join(line.strip() for line in text[-lines:] if line.strip())


def image_missing(result: CommandResult) -> bool:
    return any(marker in result.stderr for marker in MISSING_IMAGE)


def docker_fix(result: CommandResult, default: str) -> str:
    """The fix for a failed docker command: the common set-up problems first."""
    text = (result.stdout + result.stderr).lower()
    if result.exit_code == 127:
        return ("install docker (step container-runtime:docker), or set docker.binary in the "
                "inventory to the docker CLI's path")
    if "permission denied" in text and "docker" in text:
        return ("add the login user to the docker group (`sudo usermod -aG docker <user>`, "
                "then log in again), or set docker.host in the inventory to a daemon it may use")
    if "cannot connect to the docker daemon" in text or "is the docker daemon running" in text:
        return ("start docker on the guest (`sudo systemctl start docker`), or check docker.host "
                "in the inventory")
    return default


def last_json(text: str) -> dict[str, Any] | None:
    """The JSON object that ends ``text`` (an image's entrypoint may print a banner first)."""
    decoder = json.JSONDecoder()
    starts = [i for i, char in enumerate(text) if char == "{" and (i == 0 or text[i - 1] == "\n")]
    for start in starts:
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict) and not text[end:].strip():
            return value
    return None

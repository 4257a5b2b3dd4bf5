"""The synchronised start: the harness says it is ready on stdout, the orchestrator answers
``GO <unix time>`` on stdin, and the timed test starts at that moment on every instance."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from loadgen.errors import RunFailed

READY_LINE = "VGPU-HARNESS READY"
GO_WORD = "GO"


def parse_go(line: str) -> float:
    parts = line.split()
    if len(parts) != 2 or parts[0] != GO_WORD:
        raise RunFailed(f"expected '{GO_WORD} <unix_epoch_float>' on stdin, got {line.strip()!r}")
    try:
        return float(parts[1])
    except ValueError:
        raise RunFailed(f"the start time in {line.strip()!r} is not a number") from None


class StdinSync:
    def __init__(self, stdin: TextIO | None = None, stdout: TextIO | None = None) -> None:
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout

    def ready(self) -> None:
        self.stdout.write(READY_LINE + "\n")
        self.stdout.flush()

    def wait_for_go(self) -> dict[str, Any]:
        line = self.stdin.readline()
        if not line:
            raise RunFailed("stdin closed before the GO line arrived")
        go_at = parse_go(line)
        received = time.time()
        if go_at > received:
            time.sleep(go_at - received)
        started = time.time()
        return {"mode": "stdin", "go_unix": go_at, "go_received_unix": received,
                "late_s": max(0.0, started - go_at)}

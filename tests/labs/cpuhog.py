"""A CPU hog that is another process's, not a child of the caller's tree: the harness's
telemetry counts its own tree as its own, so a hog it should see as "other" must not be
in it."""

from __future__ import annotations

import subprocess
import sys


def other_process_hog() -> int:
    """A busy loop outside this process's tree (its shell parent exits at once), as
    another team's job on the machine would be; its pid."""
    started = subprocess.run(
        ["sh", "-c", f'"{sys.executable}" -c "while True: pass" >/dev/null 2>&1 & echo $!'],
        capture_output=True, text=True, check=True, timeout=30)
    return int(started.stdout.strip())

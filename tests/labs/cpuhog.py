"""A CPU hog that is another process's, not a child of the caller's tree: the harness's
telemetry counts its own tree as its own, so a hog it should see as "other" must not be
in it. Each hog is a session of its own, as another team's job on the machine would be:
where the kernel groups the scheduler's fair share by session (autogroup), every hog then
takes a share of its own, so more hogs take more of the machine from a run, whatever else
runs beside it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

BUSY_LOOP = "import os; os.setsid(); exec('while True: pass')"


def other_process_hog() -> int:
    """A busy loop outside this process's tree (its shell parent exits at once) and in a
    session of its own; its pid."""
    started = subprocess.run(
        ["sh", "-c", '"$0" -c "$1" >/dev/null 2>&1 & echo $!', sys.executable, BUSY_LOOP],
        capture_output=True, text=True, check=True, timeout=30)
    return int(started.stdout.strip())


def stop_hogs(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

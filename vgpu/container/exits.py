"""What a harness container's exit code means (``docker run`` passes the harness's code
through; 125-127 are docker's own; 128+N is a signal N, e.g. 137 after ``docker kill``)."""

from __future__ import annotations

import signal

HARNESS_EXITS = {0: "ok", 1: "the run failed (result.json has the reason)",
                 2: "bad input: nothing was run"}
RUNTIME_EXITS = {125: "the container runtime failed to start the container",
                 126: "the command in the container could not be invoked",
                 127: "the command in the container was not found"}


def killed_by(code: int) -> int | None:
    """The signal number that ended the container (128+N from docker, -N from a local
    subprocess), else None."""
    if code < 0:
        return -code
    if 128 < code < 128 + 65:
        return code - 128
    return None


def describe_exit(code: int) -> str:
    if code in HARNESS_EXITS:
        return HARNESS_EXITS[code]
    if code in RUNTIME_EXITS:
        return RUNTIME_EXITS[code]
    number = killed_by(code)
    if number is not None:
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        hint = " (docker kill, docker rm -f or the OOM killer)" if number == 9 else ""
        return f"killed by {name}{hint}"
    return f"exit code {code}"

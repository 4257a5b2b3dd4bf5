"""A real CPU quota for a process tree (a guest made slower on purpose): the process is
moved into a cgroup of its own whose CFS quota is a fraction of one core; every process it
starts afterwards (an sshd's sessions, the harness they run) inherits it. cgroup v1's cpu
controller or cgroup v2's cpu.max, whichever this machine has. Needs root.

With ``first=True`` the group also gets the highest scheduler weight (cpu.shares or
cpu.weight): up to its quota it is served before everything else on the machine, so what
it measures is the quota, not what a neighbour left it (another job, another session's
busy loops: the kernel's autogroups each weigh as one nice-0 process)."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

V1 = Path("/sys/fs/cgroup/cpu")
V2 = Path("/sys/fs/cgroup")
# A 10 ms period (the kernel's default is 100 ms): the share is taken evenly enough that a
# short burst (the bench's first calibration probe) runs at the quota too, not at full
# speed for a slice and then stopped.
PERIOD_US = 10_000
# The largest weight each version accepts (the default is 1024, and 100 on cgroup v2).
FIRST_SHARES_V1 = 262_144
FIRST_WEIGHT_V2 = 10_000


def _root() -> tuple[Path, int] | None:
    """(the cpu hierarchy's root, its version), or None."""
    if (V1 / "cpu.cfs_quota_us").exists():
        return V1, 1
    controllers = V2 / "cgroup.controllers"
    if controllers.exists() and "cpu" in controllers.read_text().split():
        return V2, 2
    return None


def quota_available() -> str | None:
    """None when a quota can be set here, else why not (for pytest.skip)."""
    if os.geteuid() != 0:
        return "a CPU quota needs root (it creates a cgroup)"
    if _root() is None:
        return "no cgroup cpu controller is mounted (/sys/fs/cgroup/cpu or cgroup2 cpu)"
    return None


@contextlib.contextmanager
def cpu_quota(pid: int, cores: float, *, first: bool = False) -> Iterator[Path]:
    """Limit ``pid`` and what it starts from now on to ``cores`` of CPU time (served
    before anything else up to that, with ``first``)."""
    found = _root()
    if found is None:
        raise RuntimeError(quota_available() or "no cpu cgroup")
    root, version = found
    group = root / f"vgpu-test-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    quota = str(int(cores * PERIOD_US))
    if version == 1:
        (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (group / "cpu.cfs_quota_us").write_text(quota)
        if first:
            (group / "cpu.shares").write_text(str(FIRST_SHARES_V1))
    else:
        (group / "cpu.max").write_text(f"{quota} {PERIOD_US}")
        if first:
            (group / "cpu.weight").write_text(str(FIRST_WEIGHT_V2))
    (group / "cgroup.procs").write_text(str(pid))
    try:
        yield group
    finally:
        for member in (group / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):  # it may have exited meanwhile
                (root / "cgroup.procs").write_text(member)
        group.rmdir()

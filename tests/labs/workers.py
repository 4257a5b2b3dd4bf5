"""Which tests share one of the machine's single resources, and so run on one pytest-xdist
worker, one after another (`scripts/test.sh` runs the suite on two workers):

- the private Docker daemons: the test lab's (tests/labs/dockerlab.py) and `vgpu sim up`'s
  (vgpu/sim/dockerd.py) each hold a lock on their cached data root for a whole session, so
  a second worker's daemon would wait out the first worker's session;
- the recording of scenario 6 (tests/bench/recording.py), made once and read by tests of
  two folders: on two workers it would be benched twice."""

from __future__ import annotations

from collections.abc import Iterable

DOCKER_DAEMON = "docker-daemon"
SCENARIO6_RECORDING = "scenario6-recording"
# Triton's tests build and run its image in the Docker lab.
_DAEMON_MARKERS = frozenset({"docker", "triton"})


def shared_resource_group(markers: Iterable[str], fixtures: Iterable[str]) -> str | None:
    """The xdist group of a test with these marker names and fixtures, None when it shares
    nothing and may run on any worker."""
    if _DAEMON_MARKERS & set(markers):
        return DOCKER_DAEMON
    if "scenario6_recording" in set(fixtures):
        return SCENARIO6_RECORDING
    return None

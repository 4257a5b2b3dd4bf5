"""The synchronised start on a virtual clock: the harness waits for the GO time it is given
and says how late it started, whatever the machine's load."""

from __future__ import annotations

import io

import pytest

from loadgen import sync
from loadgen.errors import RunFailed
from loadgen.sync import READY_LINE, StdinSync


class VirtualClock:
    """``time.time`` and ``time.sleep`` of loadgen.sync: sleeping moves the clock on."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.slept: list[float] = []

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> VirtualClock:
    virtual = VirtualClock(1000.0)
    monkeypatch.setattr(sync, "time", virtual)
    return virtual


def test_ready_then_waits_until_the_go_time(clock: VirtualClock) -> None:
    out = io.StringIO()
    waiter = StdinSync(io.StringIO("GO 1002.5\n"), out)
    waiter.ready()
    assert out.getvalue() == READY_LINE + "\n"
    said = waiter.wait_for_go()
    assert clock.slept == [2.5] and clock.now == 1002.5
    assert said == {"mode": "stdin", "go_unix": 1002.5, "go_received_unix": 1000.0,
                    "late_s": 0.0}


def test_a_go_time_already_past_starts_at_once_and_says_how_late(clock: VirtualClock) -> None:
    said = StdinSync(io.StringIO("GO 999.25\n"), io.StringIO()).wait_for_go()
    assert clock.slept == []
    assert said["late_s"] == pytest.approx(0.75) and said["go_received_unix"] == 1000.0


@pytest.mark.parametrize(("stdin", "message"), [
    ("", "stdin closed before the GO line arrived"),
    ("GO soon\n", "the start time in 'GO soon' is not a number"),
])
def test_no_go_time_is_a_failed_run_not_a_wait(clock: VirtualClock, stdin: str,
                                               message: str) -> None:
    with pytest.raises(RunFailed, match=message):
        StdinSync(io.StringIO(stdin), io.StringIO()).wait_for_go()
    assert clock.slept == []

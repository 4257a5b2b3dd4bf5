"""The clock check before a synchronised start across hosts. Every instance waits for the
same ``GO <unix time>`` by its own host's wall clock, so a host whose clock is off starts
that much early or late. Before a round on remote hosts, each host's clock offset against
this machine is measured over its SSH session: a remote ``date +%s.%N`` answered between
a local send (t0) and receive (t1), offset = remote - (t0 + t1) / 2, uncertainty
(t1 - t0) / 2, the sample with the smallest round trip of a few wins. The remote side is
one long-running shell that answers each line with ``date``, so a sample costs one
round trip and no process start. What chrony or timedatectl say of NTP on the host is
read too, for the fix; the decision rests on the measured offset."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from vgpu.errors import RemoteError
from vgpu.remote.transport import RemoteProcess, Transport
from vgpu.results.store.records import Metric

SAMPLES = 7
READ_TIMEOUT_S = 10.0
CLOCK_METRIC = "clock_offset_ms"
CLOCK_UNCERTAINTY_METRIC = "clock_offset_uncertainty_ms"
# One `date` per line read: the same command a mis-set guest's tools would answer with.
ECHO_CLOCK = "sh -c 'while read -r _; do date +%s.%N || exit 1; done'"
NTP_STATE = ("{ chronyc tracking 2>/dev/null | grep -m1 '^System time'; "
             "timedatectl show -p NTPSynchronized --value 2>/dev/null "
             "| sed 's/^/NTPSynchronized=/'; } || true")


@dataclass(frozen=True)
class ClockOffset:
    """One host's clock against this machine's: positive when the host is ahead."""

    host: str
    offset_ms: float
    uncertainty_ms: float
    ntp: str  # what chrony / timedatectl report, or "not reported"

    def describe(self) -> str:
        return (f"{self.host} {self.offset_ms:+.1f} ms (±{self.uncertainty_ms:.1f} ms, "
                f"`date` over SSH; NTP: {self.ntp})")


def _one_sample(transport_name: str, process: RemoteProcess) -> tuple[float, float]:
    """(offset s, uncertainty s) from one round trip."""
    t0 = time.time()
    process.write_line("t")
    line = process.read_line(READ_TIMEOUT_S)
    t1 = time.time()
    try:
        remote = float(line or "")
    except ValueError:
        raise RemoteError(f"{transport_name}: `date +%s.%N` answered {line!r}, not a time; "
                          "the clock check needs GNU date on the host") from None
    return remote - (t0 + t1) / 2, (t1 - t0) / 2


def measure_offset(transport: Transport, samples: int = SAMPLES) -> ClockOffset:
    """The host's clock offset, from the best of ``samples`` round trips."""
    process = transport.open_process(ECHO_CLOCK)
    try:
        found = [_one_sample(transport.name, process) for _ in range(samples)]
    finally:
        process.close()
    offset, uncertainty = min(found, key=lambda pair: pair[1])
    ntp = " ".join(transport.run(NTP_STATE, timeout=READ_TIMEOUT_S).stdout.split())
    return ClockOffset(transport.name, offset * 1e3, uncertainty * 1e3, ntp or "not reported")


def check_offset(clock: ClockOffset, max_offset_ms: float) -> None:
    """Refuses a synchronised start with a host whose clock is off by more than allowed."""
    if abs(clock.offset_ms) <= max_offset_ms:
        return
    raise RemoteError(
        f"{clock.host}: its clock is {clock.offset_ms:+.1f} ms off this machine's "
        f"(±{clock.uncertainty_ms:.1f} ms, measured with `date` over SSH; NTP there: "
        f"{clock.ntp}), above the allowed {max_offset_ms:g} ms: its instances would start "
        f"{abs(clock.offset_ms):.0f} ms away from the others, so the synchronised start "
        "is refused. Fix: enable NTP on the host (`sudo timedatectl set-ntp true`, or "
        "install and start chrony) and on this machine, wait until `chronyc tracking` "
        "shows a small 'System time' offset, then run again; or allow more with "
        "--max-clock-offset-ms")


def clock_metrics(offsets: Iterable[tuple[str, ClockOffset]]) -> list[Metric]:
    """Per instance: its host's offset and the offset's uncertainty, as run metrics."""
    metrics = []
    for instance, clock in offsets:
        metrics.append(Metric(CLOCK_METRIC, clock.offset_ms, "ms", instance))
        metrics.append(Metric(CLOCK_UNCERTAINTY_METRIC, clock.uncertainty_ms, "ms", instance))
    return metrics

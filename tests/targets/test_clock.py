"""The clock check before a synchronised start, on the real SSH lab (one sshd per host).
A host whose `date` reports a shifted time stands for a guest with a mis-set clock: the
check reads the time with that same `date`, so it sees what it would see there (the shim
moves only what `date` prints; the harness's own clock is this machine's, since the lab
hosts share one kernel). An unshifted lab passes, runs a real bench and stores each
instance's offset as a run metric."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.labs.connect import FAST
from tests.labs.fixtures import ssh_lab
from tests.labs.sshlab import LabHost, SshLab, lab_available
from tests.train.labnodes import install_lab_harness
from vgpu.bench.session import run_bench
from vgpu.bench.workload import BenchOverrides
from vgpu.errors import RemoteError
from vgpu.model.load import load_scenario
from vgpu.remote.hostlog import HostLog
from vgpu.remote.redact import Redactor
from vgpu.remote.ssh import SSHTransport
from vgpu.remote.targets import HostTarget
from vgpu.results.store.records import Platform
from vgpu.results.store.result_store import ResultStore
from vgpu.targets.clock import CLOCK_METRIC, ClockOffset, check_offset, measure_offset
from vgpu.targets.connect import build_targets
from vgpu.targets.placements import NO_GPU, HarnessPlacement

pytestmark = [
    pytest.mark.sshd, pytest.mark.slow,
    pytest.mark.skipif(lab_available() is not None, reason=str(lab_available())),
]
ROOT = Path(__file__).resolve().parents[2]
# Loopback round trips take well under a millisecond; a few ms covers a busy machine.
FEW_MS = 5.0


lab = ssh_lab(2, scope="module")


def _target(lab: SshLab, host: LabHost) -> HostTarget:
    return HostTarget(name=host.name, address=host.address, user=host.user, port=host.port,
                      key_file=lab.key_path, known_hosts=lab.known_hosts_path)


def _placement(lab: SshLab, host: LabHost) -> HarnessPlacement:
    return HarnessPlacement(f"{host.name}-tenant", _target(lab, host), NO_GPU, "bare-metal",
                     Platform(host=host.name, attachment="none"))


def test_the_offset_of_an_unshifted_host_is_within_a_few_ms(lab: SshLab,
                                                            tmp_path: Path) -> None:
    host = lab.hosts[0]
    transport = SSHTransport(_target(lab, host), FAST,
                             HostLog(tmp_path / "host.log", Redactor()))
    transport.connect()
    try:
        clock = measure_offset(transport)
    finally:
        transport.close()
    assert clock.host == host.name
    assert abs(clock.offset_ms) < FEW_MS and 0 < clock.uncertainty_ms < FEW_MS
    check_offset(clock, max_offset_ms=50)  # no refusal


def test_a_shifted_guest_clock_is_measured_and_refused(lab: SshLab, tmp_path: Path) -> None:
    shifted = lab.hosts[1]
    shifted.shift_clock(-0.4)
    try:
        with pytest.raises(RemoteError) as refused:
            # the shifted host first: refused before any harness is looked for
            build_targets([_placement(lab, shifted), _placement(lab, lab.hosts[0])],
                          tmp_path / "ssh", FAST)
    finally:
        shifted.shift_clock(None)
    message = str(refused.value)
    assert "its clock is " in message, message
    assert refused.value.exit_code == 1
    found = float(message.split("its clock is ")[1].split(" ms")[0])
    assert found == pytest.approx(-400, abs=FEW_MS)
    assert message.startswith(f"{shifted.name}: its clock is -")
    assert "above the allowed 50 ms" in message
    assert "Fix: enable NTP on the host" in message and "--max-clock-offset-ms" in message


def test_the_refusal_names_the_allowed_skew_given() -> None:
    clock = ClockOffset("vm-3", offset_ms=12.5, uncertainty_ms=0.2, ntp="not reported")
    check_offset(clock, max_offset_ms=20)
    with pytest.raises(RemoteError, match=r"vm-3: its clock is \+12.5 ms .*allowed 10 ms"):
        check_offset(clock, max_offset_ms=10)


def test_an_unshifted_lab_benches_and_stores_each_instance_offset(lab: SshLab,
                                                                  tmp_path: Path) -> None:
    for host in lab.hosts:
        install_lab_harness(host)
    scenario = load_scenario(ROOT / "scenarios" / "bm_mig_1x1g.yaml")
    with ResultStore.open(tmp_path / "vgpu-results.db") as store:
        targets, notes = build_targets([_placement(lab, h) for h in lab.hosts],
                                       store.logs_root / "ssh", FAST)
        try:
            outcome = run_bench(scenario, targets, notes, store, runs=1,
                                overrides=BenchOverrides(duration_s=1),
                                workload_names=["resnet50-offline"])
        finally:
            for target in targets:
                target.transport.close()
        assert outcome.failure is None
        clock_notes = [n for n in outcome.notes if n.startswith("clock: ")]
        assert [n.split()[1] for n in clock_notes] == [h.name for h in lab.hosts]
        assert all("allowed ±50 ms" in n for n in clock_notes)
        [run_id] = outcome.workloads[0].run_ids
        offsets = {m.instance: m.value for m in store.metrics(run_id)
                   if m.name == CLOCK_METRIC}
    assert set(offsets) == {f"{h.name}-tenant" for h in lab.hosts}
    assert all(abs(value) < FEW_MS for value in offsets.values())

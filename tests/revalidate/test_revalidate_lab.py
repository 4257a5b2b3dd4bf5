"""`vgpu revalidate` on the simulated lab, as after an upgrade: a baseline captured on the
vSphere simulator (scenario 6's three VMs are loopback sshd guests), the simulator started
again as an "upgraded" lab (other ESXi build, other NVIDIA VIB), one guest made slower with
a real CPU quota; then the drift, a FAIL against the baseline with the platform changes
beside it, and a scenario that can no longer run once its vGPU type is gone.

The machine may be busy (another job, a shared developer box): the guest made slower runs
in a CPU group of its own, served before anything else up to its quota, both for the
capture (0.6 of a core, about its share of two cores beside two other guests) and after
(a quarter of one), so its regression is the quota's, never the neighbour's."""

from __future__ import annotations

import io
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from tests.labs.connect import FAST
from tests.labs.cpuquota import cpu_quota, quota_available
from tests.labs.sshlab import SshLab, lab_host_targets
from tests.labs.sshlab import lab_available as ssh_lab_available
from tests.labs.vcsim import VcsimLab
from tests.labs.vcsim import lab_available as vcsim_available
from tests.revalidate.exits import ran_as_judged
from vgpu.bench.job import BenchRequest
from vgpu.bench.workload import BenchOverrides
from vgpu.container.images import HeldImage
from vgpu.model.load import load_inventory, load_scenario
from vgpu.model.scenario import Scenario
from vgpu.provision.adapter import HarnessOptions, harness_spec
from vgpu.provision.fanout import Job, provision_all
from vgpu.provision.requirements import GuestRequirements
from vgpu.remote.redact import Redactor
from vgpu.results.store.result_store import ResultStore
from vgpu.revalidate.capture import CapturePlan
from vgpu.revalidate.flow import RevalidateOutcome, RevalidateRequest, revalidate
from vgpu.sim.lab import LabShape
from vgpu.site import open_site
from vgpu.targets.placements import vsphere_placements
from vgpu.targets.runtime import RuntimeOptions
from vgpu.vsphere import commands

ROOT = Path(__file__).resolve().parents[2]
SCENARIO_6 = ROOT / "scenarios" / "mig_4g_2g_1g.yaml"
UPGRADED = LabShape(esxi_build="24022510", vib_version="550.90.05-1OEM.800.1.0.20613240")

pytestmark = [
    pytest.mark.vcsim, pytest.mark.sshd, pytest.mark.slow, pytest.mark.timeout(1200),
    pytest.mark.skipif(vcsim_available() is not None, reason=str(vcsim_available())),
    pytest.mark.skipif(ssh_lab_available() is not None, reason=str(ssh_lab_available())),
    pytest.mark.skipif(quota_available() is not None, reason=str(quota_available())),
]


@pytest.fixture
def ssh() -> Iterator[SshLab]:
    with SshLab(3) as lab:
        yield lab


class Lab:
    """The SSH guests stay; the vCenter simulator is started and stopped around them."""

    def __init__(self, ssh: SshLab, folder: Path) -> None:
        self.ssh, self.folder = ssh, folder
        self.inventory = folder / "lab.yaml"
        self.to_lab = lab_host_targets(ssh)
        self.harness = harness_spec(HarnessOptions(
            install_requirements=False, extra_site_dirs=(sysconfig.get_paths()["purelib"],)))

    def converge(self, sc: Scenario, host: str | None, image: HeldImage | None) -> None:
        """What `vgpu apply` + `vgpu provision` do, with the guests reached in the lab."""
        inventory = load_inventory(self.inventory)
        commands.apply(sc, inventory, self.inventory, dry_run=False, confirm=lambda _: True,
                       concurrency=4, ip_timeout_s=60, console=Console(file=io.StringIO()),
                       host=host)
        jobs = [Job(self.to_lab(p.host_target),
                    GuestRequirements(steps=("os-facts", "node-harness"), harness=self.harness))
                for p in vsphere_placements(sc, inventory, self.inventory) if p.host_target]
        done = provision_all(jobs, options=FAST, log_dir=self.folder / "provision",
                             state_dir=self.folder / "state", scenario=sc.id, concurrency=3,
                             redactor=Redactor())
        assert done.exit_code == 0, done.failure_lines()

    def revalidate(self, capture: bool = False, runs: int = 3) -> RevalidateOutcome:
        request = RevalidateRequest(
            inventory=load_inventory(self.inventory), inventory_path=self.inventory,
            scenarios=[load_scenario(SCENARIO_6)],
            # one INVALID run (a throttled guest's run that ended early) may leave: a
            # verdict needs all but one VALID (--min-valid), not every repeat
            bench=BenchRequest(open_site(self.inventory), runs, ["resnet50-offline"],
                               BenchOverrides(duration_s=1.0, min_valid=runs - 1),
                               allow_cpu=True,
                               runtime=RuntimeOptions(runtime="host"),
                               host_target_hook=self.to_lab, connect=FAST),
            facts_dir=self.folder / "facts", state_dir=self.folder / "state-revalidate",
            # one series per capture: the spread has its own tests
            capture_baseline=capture, capture=CapturePlan(series=1))
        with ResultStore.open(self.folder / "results.db") as store:
            return revalidate(request, store, Console(file=io.StringIO()), self.converge)


def test_after_an_upgrade_the_slowed_guest_fails_beside_the_drift(
    ssh: SshLab, tmp_path: Path,
) -> None:
    lab = Lab(ssh, tmp_path)
    slow_guest = next(h for h in ssh.hosts if h.address == "127.0.0.12")  # s6-2g
    assert slow_guest.process is not None
    with VcsimLab() as before, cpu_quota(slow_guest.process.pid, 0.6, first=True):
        before.write_inventory(lab.inventory)
        captured = lab.revalidate(capture=True, runs=5)  # its INVALID runs leave too
    assert not captured.could_not_run and captured.state.finished
    assert captured.exit_code == ran_as_judged(captured)
    assert captured.drift is None  # the first preflight of this inventory
    [first] = captured.verdicts
    assert first.vs_baseline is None and "this run is baseline 'pre-upgrade'" in first.notes

    with VcsimLab(UPGRADED) as after, cpu_quota(slow_guest.process.pid, 0.25, first=True):
        after.write_inventory(lab.inventory)
        # the throttled guest's runs end early (INVALID) more often, the more so on a busy
        # machine: eight repeats leave enough VALID ones for its own check (two or more;
        # six left it without one beside a busy suite)
        upgraded = lab.revalidate(runs=8)
    rows = {(r["field"], r["before"], r["after"]) for r in upgraded.drift["rows"]}
    assert ("ESXi build", "22380479", "24022510") in rows
    assert any(f == "host driver" and a.startswith("NVD-AIE") and "550.90.05" in a
               for f, _, a in rows)
    assert upgraded.drift["breaking"] is False
    [verdict] = upgraded.verdicts
    assert verdict.vs_baseline is not None and verdict.verdict == "FAIL", [
        (c.metric, c.verdict, c.reason[:300]) for c in verdict.vs_baseline.checks]
    checks = {c.metric: c for c in verdict.vs_baseline.checks}
    slowed = checks["throughput s6-2g"]  # the other guests share the freed cores
    assert slowed.verdict == "FAIL", slowed.reason
    # a quarter of a core against 0.6 of one: how much of that a guest's harness loses
    # depends on how busy the machine is, but it loses more than any guest beside it
    assert slowed.difference_pct < -15, slowed.difference_pct
    others = [c for m, c in checks.items() if m.startswith("throughput ") and c is not slowed]
    assert others and all(slowed.difference_pct < c.difference_pct - 10 for c in others), [
        (c.metric, c.difference_pct) for c in others]
    changed = {c.field: (c.reference, c.candidate) for c in verdict.vs_baseline.platform_changes}
    assert changed["esxi_build"] == ("22380479", "24022510")
    assert "535.161.05" in (changed["host_driver"][0] or "")
    assert "550.90.05" in (changed["host_driver"][1] or "")
    assert upgraded.exit_code == 3

    gone = LabShape(esxi_build="24022510", removed_vgpu_types=("grid_a100d-2-20c",))
    with VcsimLab(gone) as broken:
        broken.write_inventory(lab.inventory)
        blocked = lab.revalidate()
    assert blocked.exit_code == 1
    assert "grid_a100d-2-20c" in blocked.could_not_run["6"].lower()
    assert blocked.verdicts == []

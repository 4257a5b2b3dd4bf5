"""A rolling upgrade of a two-host simulated lab, host by host, as a lab engineer runs it:
baselines captured on both hosts (scenario 5 pinned to H0, scenario 4 to H1), `vgpu drain
--host H1`, `vgpu sim upgrade --host H1` (in place: H1's VMs survive powered off, H0 keeps
its build), `vgpu undrain --host H1`, then the revalidation of H1 against H1's own baseline
with H1's drift only, and H0 untouched. An upgrade installed without its reboot makes
undrain refuse.

Everything runs through the CLI on `vgpu sim up`'s lab (its vCenter part: no guests are
made), except the revalidations: their benches reach the VMs' IPs through the loopback SSH
lab (tests/labs/sshlab.py), which the CLI cannot be pointed at; they run the same flow the
CLI runs (vgpu.revalidate.flow) with one tiny repeat each."""

from __future__ import annotations

import io
import json
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from tests.cli.invoke import run_cli
from tests.labs.connect import FAST
from tests.labs.sshlab import SshLab, lab_host_targets
from tests.labs.sshlab import lab_available as ssh_lab_available
from tests.labs.vcsim import lab_available as vcsim_available
from tests.revalidate.exits import ran_as_judged
from vgpu import catalog
from vgpu.bench.job import BenchRequest
from vgpu.bench.workload import BenchOverrides
from vgpu.container.images import HeldImage
from vgpu.model.load import load_inventory
from vgpu.model.scenario import Scenario
from vgpu.provision.adapter import HarnessOptions, harness_spec
from vgpu.provision.fanout import Job, provision_all
from vgpu.provision.requirements import GuestRequirements
from vgpu.remote.redact import Redactor
from vgpu.results.store.result_store import ResultStore
from vgpu.revalidate.capture import CapturePlan
from vgpu.revalidate.flow import RevalidateOutcome, RevalidateRequest, revalidate
from vgpu.revalidate.hosts import choose_baseline
from vgpu.sim import guests
from vgpu.site import open_site
from vgpu.targets.placements import vsphere_placements
from vgpu.targets.runtime import RuntimeOptions

H0, H1 = "DC0_C0_H0", "DC0_C0_H1"
OLD_BUILD, NEW_BUILD = "22380479", "24022510"
NEW_VIB = "550.90.05-1OEM.800.1.0.20613240"

pytestmark = [
    pytest.mark.vcsim, pytest.mark.sshd, pytest.mark.slow, pytest.mark.timeout(900),
    pytest.mark.skipif(vcsim_available() is not None, reason=str(vcsim_available())),
    pytest.mark.skipif(ssh_lab_available() is not None, reason=str(ssh_lab_available())),
]


class RollingLab:
    """`vgpu sim up --hosts 2` in ``folder`` (vCenter only) and the SSH guests behind it."""

    def __init__(self, folder: Path, ssh: SshLab) -> None:
        self.folder, self.ssh = folder, ssh
        self.inventory = folder / catalog.LOCAL_INVENTORY
        self.db = folder / "results.db"
        self.to_lab = lab_host_targets(ssh)
        self.harness = harness_spec(HarnessOptions(
            install_requirements=False, extra_site_dirs=(sysconfig.get_paths()["purelib"],)))

    def vgpu(self, *args: str) -> tuple[int, str]:
        """Exit code and output (stdout, then stderr) of `vgpu ARGS`, unwrapped."""
        code, out, err = run_cli([*args])
        return code, " ".join((out + err).split())

    def window_args(self) -> list[str]:
        return ["-i", str(self.inventory), "--facts-dir", str(self.folder / "facts"),
                "--records-dir", str(self.folder / "upgrade")]

    def converge(self, sc: Scenario, host: str | None, image: HeldImage | None) -> None:
        """`vgpu apply --host` (the CLI) and what `vgpu provision` does, over the SSH lab."""
        code, out = self.vgpu("apply", "-i", str(self.inventory), "--scenario", sc.id,
                              "--host", str(host), "--yes", "--no-provision")
        assert code == 0, out
        inventory = load_inventory(self.inventory)
        jobs = [Job(self.to_lab(p.host_target),
                    GuestRequirements(steps=("os-facts", "node-harness"), harness=self.harness))
                for p in vsphere_placements(sc, inventory, self.inventory) if p.host_target]
        done = provision_all(jobs, options=FAST, log_dir=self.folder / "provision",
                             state_dir=self.folder / "state", scenario=sc.id, concurrency=2,
                             redactor=Redactor())
        assert done.exit_code == 0, done.failure_lines()

    def revalidate(self, scenario: str, host: str, capture: bool = False) -> RevalidateOutcome:
        with ResultStore.open(self.db) as store:
            choice = choose_baseline(store, "pre-upgrade", host, None, capture, False,
                                     [scenario])
            request = RevalidateRequest(
                inventory=load_inventory(self.inventory), inventory_path=self.inventory,
                scenarios=[catalog.load(scenario)],
                bench=BenchRequest(open_site(self.inventory), 1, ["resnet50-offline"],
                                   BenchOverrides(duration_s=0.5), allow_cpu=True,
                                   runtime=RuntimeOptions(runtime="host"),
                                   host_target_hook=self.to_lab, connect=FAST),
                facts_dir=self.folder / "facts", state_dir=self.folder / "revalidate",
                # one series per capture: the spread has its own tests
                capture_baseline=capture, choice=choice, capture=CapturePlan(series=1))
            return revalidate(request, store, Console(file=io.StringIO()), self.converge)

    def vms(self) -> dict[str, tuple[str, bool]]:
        """Every VM of vgpu's in the lab: its host and whether it is powered on."""
        from vgpu.vsphere.connect.connection import connect
        from vgpu.vsphere.connect.from_inventory import (
            placement_from_inventory,
            target_from_inventory,
        )
        from vgpu.vsphere.plan.reconcile import read_state

        inventory = load_inventory(self.inventory)
        with connect(target_from_inventory(inventory, self.inventory)) as session:
            state = read_state(session, placement_from_inventory(inventory, self.inventory))
        return {vm.name: (vm.host or "-", vm.powered_on) for vm in state.vms.values()
                if vm.owned}


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RollingLab]:
    monkeypatch.setenv("VGPU_SIM_STATE_DIR", str(tmp_path / "sim-state"))
    monkeypatch.setattr(guests, "missing_for_guests", lambda: "guests: this test's SSH lab")
    monkeypatch.chdir(tmp_path)
    with SshLab(2) as ssh:
        code, out, err = run_cli(["sim", "up", "--port", "0", "--hosts", "2", "--gpus", "1"])
        assert code == 0, out + err
        inventory = tmp_path / catalog.LOCAL_INVENTORY
        data = yaml.safe_load(inventory.read_text())
        data["network"]["static"] = {"s4-2g": ssh.hosts[1].address}  # s5-1g: the pool's first
        inventory.write_text(yaml.safe_dump(data))
        try:
            yield RollingLab(tmp_path, ssh)
        finally:
            run_cli(["sim", "down"])


def test_a_rolling_upgrade_revalidates_the_upgraded_host_against_its_own_baseline(
    lab: RollingLab,
) -> None:
    # Before the upgrade: a baseline on each host, each scenario pinned to its host.
    on_h0 = lab.revalidate("5", H0, capture=True)
    on_h1 = lab.revalidate("4", H1, capture=True)
    for captured in (on_h0, on_h1):
        assert not captured.could_not_run and captured.state.finished
        assert captured.exit_code == ran_as_judged(captured)
    assert lab.vms() == {"s5-1g": (H0, True), "s4-2g": (H1, True)}
    with ResultStore.open(lab.db) as store:
        recorded = {b.name: b for b in store.baseline_sets()}
    assert recorded[f"pre-upgrade@{H1}"].host == H1
    assert recorded[f"pre-upgrade@{H1}"].hardware_uuid != recorded[f"pre-upgrade@{H0}"] \
        .hardware_uuid
    code, out = lab.vgpu("revalidate", "-i", str(lab.inventory), "--scenario", "4",
                         "--host", H1, "--capture-baseline", "--db", str(lab.db))
    assert code == 2 and "--replace" in out  # a baseline is never overwritten silently

    # The upgrade window of H1.
    code, out = lab.vgpu("drain", "--host", H1, "--db", str(lab.db), *lab.window_args())
    assert code == 0, out
    assert "s4-2g: guest shut down" in out and f"host {H1} is in maintenance mode" in out
    assert lab.vms() == {"s5-1g": (H0, True), "s4-2g": (H1, False)}
    code, out = lab.vgpu("apply", "-i", str(lab.inventory), "--scenario", "4", "--host", H1,
                         "--yes", "--no-provision")
    assert code == 2 and f"vgpu undrain --host {H1}" in out

    code, out = lab.vgpu("sim", "upgrade", "--host", H1, "--no-reboot")
    assert code == 0 and "reboot pending" in out, out
    code, out = lab.vgpu("undrain", "--host", H1, *lab.window_args())
    assert code == 1 and "reboot pending" in out and "stays in maintenance mode" in out, out

    code, out = lab.vgpu("sim", "upgrade", "--host", H1)
    assert code == 0, out
    code, out = lab.vgpu("undrain", "--host", H1, *lab.window_args())
    assert code == 0, out
    assert f"ESXi build {OLD_BUILD} -> {NEW_BUILD}" in out and NEW_VIB in out
    assert lab.vms() == {"s5-1g": (H0, True), "s4-2g": (H1, False)}  # survived, off

    # After: H1 against its own baseline, with H1's drift only; H0 untouched.
    after = lab.revalidate("4", H1)
    assert not after.could_not_run and after.host == H1
    assert after.exit_code == ran_as_judged(after) != 5  # judged against H1's own baseline
    assert lab.vms() == {"s5-1g": (H0, True), "s4-2g": (H1, True)}
    rows = after.drift["rows"] if after.drift else []
    assert {r["host"] for r in rows} == {H1}
    changed = {r["field"]: (r["before"], r["after"]) for r in rows}
    assert changed["ESXi build"] == (OLD_BUILD, NEW_BUILD)
    assert NEW_VIB in changed["host driver"][1]
    assert "boot time" in changed
    [verdict] = after.verdicts
    assert verdict.vs_baseline is not None, verdict.notes
    moved = {c.field: (c.reference, c.candidate) for c in verdict.vs_baseline.platform_changes}
    assert "host" not in moved and moved["esxi_build"] == (OLD_BUILD, NEW_BUILD)

    untouched = lab.revalidate("5", H0)
    assert not untouched.could_not_run
    assert untouched.exit_code == ran_as_judged(untouched) != 5
    assert untouched.drift is not None and untouched.drift["rows"] == []
    [h0_verdict] = untouched.verdicts
    assert h0_verdict.vs_baseline is not None
    assert h0_verdict.vs_baseline.platform_changes == []

    # H0's baseline is no reference for H1 unless asked for.
    code, out = lab.vgpu("revalidate", "-i", str(lab.inventory), "--scenario", "4", "--host",
                         H0, "--db", str(lab.db), "--no-converge", "--facts-dir",
                         str(lab.folder / "facts"))
    assert code == 5 and "--other-host" in out  # nothing to judge against: nothing ran
    facts = json.loads((lab.folder / "upgrade" / f"drain-{H1}.json").read_text())
    assert facts["undrained_at"] is not None and facts["baselines"] == [f"pre-upgrade@{H1}"]

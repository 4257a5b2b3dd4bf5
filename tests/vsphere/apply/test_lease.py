"""One change at a time per lab: apply and destroy hold the lab's lease (a folder vCenter
creates once, with its holder, command and expiry as a custom attribute), refuse while
another run holds it, renew it while working, release it at the end and on Ctrl-C, and read
vCenter again after the confirmation prompt."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyVmomi import vim
from rich.console import Console

from tests.labs.vcsim import VcsimLab, lab_available
from vgpu import catalog
from vgpu.errors import RemoteError
from vgpu.model.load import load_inventory
from vgpu.model.scenario import Scenario
from vgpu.sim.lab import LabShape
from vgpu.vsphere import commands
from vgpu.vsphere.apply.lease import LabLease, LeaseHeld, lease_folder_name
from vgpu.vsphere.connect.connection import Session, connect, resolve_placement
from vgpu.vsphere.connect.tasks import wait_for_task
from vgpu.vsphere.plan.reconcile import read_state

pytestmark = [pytest.mark.vcsim,
              pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))]

REPO = Path(__file__).resolve().parents[3]
SCENARIO_8 = str(REPO / "scenarios" / "mig_7x1g.yaml")


@pytest.fixture
def session(vcsim_lab: VcsimLab) -> Iterator[tuple[Session, Any]]:
    """A session and the lab's VM folder."""
    with connect(vcsim_lab.target()) as s:
        yield s, resolve_placement(s, vcsim_lab.placement_names()).folder


def lease_folders(folder: Any) -> list[str]:
    return [c.name for c in folder.childEntity if isinstance(c, vim.Folder)]


def test_a_held_lease_is_refused_naming_holder_command_and_expiry(
    session: tuple[Session, Any],
) -> None:
    s, folder = session
    first = LabLease(s, folder, "lab-a", "vgpu apply --scenario 8")
    first.acquire()
    assert lease_folders(folder) == [lease_folder_name("lab-a")]
    with pytest.raises(LeaseHeld) as refused:
        LabLease(s, folder, "lab-a", "vgpu destroy --scenario 8").acquire()
    text = str(refused.value)
    assert f"lab lab-a is busy: its lease is held by {first.holder}, running `vgpu apply " \
           "--scenario 8`, until " in text and " UTC" in text and "--break-lease" in text
    # Another lab in the same folder has a lease of its own.
    other = LabLease(s, folder, "lab-b", "vgpu apply --scenario 6")
    other.acquire()
    first.release()
    other.release()
    assert lease_folders(folder) == []


def test_break_lease_takes_a_live_lease_with_a_warning_and_an_expired_one_is_taken_over(
    session: tuple[Session, Any],
) -> None:
    s, folder = session
    warnings: list[str] = []
    LabLease(s, folder, "lab-a", "vgpu apply --scenario 8").acquire()
    breaker = LabLease(s, folder, "lab-a", "vgpu destroy --scenario 8", break_lease=True,
                       warn=warnings.append)
    breaker.acquire()
    assert len(warnings) == 1 and warnings[0].startswith("breaking the lease of lab lab-a")
    assert breaker.read(breaker.folder).command == "vgpu destroy --scenario 8"  # type: ignore[union-attr]

    short = LabLease(s, folder, "lab-c", "vgpu apply --scenario 8", ttl_s=1.0)
    short.acquire()  # its holder "dies": no renewal, no release
    time.sleep(1.5)
    taker = LabLease(s, folder, "lab-c", "vgpu apply --scenario 8", warn=warnings.append)
    taker.acquire()
    assert warnings[-1].startswith("taking over the expired lease of lab lab-c")
    assert sorted(lease_folders(folder)) == [lease_folder_name("lab-a"),
                                             lease_folder_name("lab-c")]


def test_the_lease_is_renewed_while_held_and_released_on_ctrl_c(
    session: tuple[Session, Any],
) -> None:
    s, folder = session
    with pytest.raises(KeyboardInterrupt), LabLease(s, folder, "lab-a", "apply",
                                                    ttl_s=0.4) as lease:
        first = lease.read(lease.folder)
        time.sleep(0.35)
        assert lease.renewals >= 2
        renewed = lease.read(lease.folder)
        assert first is not None and renewed is not None and renewed.expires > first.expires
        raise KeyboardInterrupt
    assert lease_folders(folder) == []


def _start_apply(inventory: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    return subprocess.Popen(
        [sys.executable, "-m", "vgpu", "apply", "--no-provision", SCENARIO_8, "-i", inventory,
         "--yes"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_applies_started_together_one_proceeds_the_other_refuses_naming_it(
    tmp_path: Path,
) -> None:
    # Power-ons that take a while, so the two runs overlap.
    with VcsimLab(LabShape(vgpu_power_on_ms=300)) as lab:
        inventory = str(lab.write_inventory(tmp_path / "inv.yaml"))
        runs = [_start_apply(inventory), _start_apply(inventory)]
        results = [(run.pid, *run.communicate(timeout=120), run.returncode) for run in runs]
        [(winner, out, _, _)] = [r for r in results if r[3] == 0]
        [(_, _, refused, code)] = [r for r in results if r[3] != 0]
        assert code == 1, refused
        text = " ".join(refused.split())
        assert "is busy: its lease is held by" in text and f"(pid {winner})" in text
        assert "running `vgpu apply --scenario 8`" in text
        assert "7 of 7 VM(s) done" in out
        with connect(lab.target()) as s:
            state = read_state(s, lab.placement_names(
                lab=load_inventory(Path(inventory)).lab_name))
            assert lease_folders(state.placement.folder) == []
        vms = {n: vm for n, vm in state.vms.items() if n.startswith("s8-")}
        assert len(vms) == 7
        assert all(vm.owned and vm.powered_on and vm.ip for vm in vms.values())


def _quiet() -> Console:
    return Console(file=io.StringIO(), width=200)


def test_destroy_reads_again_after_the_prompt_and_stops_when_vcenter_changed(
    vcsim_lab: VcsimLab, tmp_path: Path,
) -> None:
    inventory_path = vcsim_lab.write_inventory(tmp_path / "inv.yaml")
    inventory = load_inventory(inventory_path)
    scenario: Scenario = catalog.load("8")
    commands.apply(scenario, inventory, inventory_path, dry_run=False, confirm=lambda q: True,
                   concurrency=8, ip_timeout_s=30, console=_quiet())

    with connect(vcsim_lab.target()) as other:  # another engineer, logged in meanwhile
        def someone_powers_one_off(question: str) -> bool:
            names = vcsim_lab.placement_names(lab=inventory.lab_name)
            vm = read_state(other, names).vms["s8-1g-3"]
            wait_for_task(vm.ref.PowerOffVM_Task(), "power off")
            return True

        with pytest.raises(RemoteError, match="vCenter changed while the plan was shown"):
            commands.destroy(scenario, inventory, inventory_path,
                             confirm=someone_powers_one_off, concurrency=8, console=_quiet())
    with connect(vcsim_lab.target()) as s:
        state = read_state(s, vcsim_lab.placement_names(lab=inventory.lab_name))
        assert lease_folders(state.placement.folder) == []  # released on the error too
    assert sum(1 for n in state.vms if n.startswith("s8-")) == 7  # nothing deleted


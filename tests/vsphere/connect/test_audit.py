"""The audit trail on the simulated lab: an apply, a drain and a lease break each appear
in `vgpu audit` and as vCenter user events on their objects; a command killed mid-change
leaves that change listed as started."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pyVmomi import vim

from tests.cli.invoke import run_cli
from tests.labs.vcsim import VcsimLab, lab_available
from vgpu.results.store.result_store import ResultStore
from vgpu.sim.lab import LabShape
from vgpu.vsphere.apply.lease import LabLease
from vgpu.vsphere.connect import audit
from vgpu.vsphere.connect.connection import connect, resolve_placement

pytestmark = [pytest.mark.vcsim,
              pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))]

REPO = Path(__file__).resolve().parents[3]
SCENARIO_1 = str(REPO / "scenarios" / "mig_1x7g.yaml")


def _events(lab: VcsimLab, entity: object | None = None) -> list[str]:
    with connect(lab.target()) as session:
        spec = vim.event.EventFilterSpec(eventTypeId=["GeneralUserEvent"])
        if entity is not None:
            spec.entity = vim.event.EventFilterSpec.ByEntity(
                entity=entity, recursion="self")
        return [e.message for e in session.content.eventManager.QueryEvents(spec)]


def test_apply_drain_and_a_lease_break_are_in_vgpu_audit_and_vcenter_events(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "audit.db"
    monkeypatch.setenv("VGPU_AUDIT_DB", str(db))
    monkeypatch.setenv(audit.CAMPAIGN_ENV, "upgrade-550")
    with VcsimLab(LabShape(hosts=2)) as lab:
        inventory = str(lab.write_inventory(tmp_path / "inv.yaml"))
        code, _, err = run_cli(["apply", "--no-provision", SCENARIO_1, "-i", inventory,
                                "--yes"])
        assert code == 0, err
        # A lease left by a run that died, broken by the next one.
        with connect(lab.target()) as session:
            folder = resolve_placement(session, lab.placement_names()).folder
            LabLease(session, folder, "vcsim-lab", "vgpu apply (died)").acquire()
        code, _, err = run_cli(["destroy", "--scenario", "1", "-i", inventory, "--yes",
                                "--break-lease"])
        assert code == 0, err
        code, _, err = run_cli(["drain", "--host", "DC0_C0_H1", "-i", inventory,
                                "--facts-dir", str(tmp_path / "facts"),
                                "--records-dir", str(tmp_path / "records")])
        assert code == 0, err

        with ResultStore.open(db) as store:
            entries = store.audit_entries()
        changes = [(e.object_type, e.change, e.result) for e in entries]
        assert ("VirtualMachine", "clone of VM s1-7g", "success") in changes
        assert any(c[1] == "power on of VM s1-7g" and c[2] == "success" for c in changes)
        assert any(c[1].startswith("lease of lab vcsim-lab broken (held by") for c in changes)
        assert ("HostSystem", "enter maintenance mode on DC0_C0_H1", "success") in changes
        power_on = next(e for e in entries if e.change == "power on of VM s1-7g")
        assert power_on.user == "user" and power_on.campaign == "upgrade-550"
        assert power_on.command.startswith("vgpu apply --no-provision")
        assert power_on.holder and "pid" in power_on.holder
        assert power_on.task and power_on.task.startswith("task-")

        code, out, err = run_cli(["audit", "--db", str(db), "--host", "DC0_C0_H1",
                                  "--campaign", "upgrade-550", "--json"])
        assert code == 0, err
        listed = json.loads(out)
        assert [e["change"] for e in listed] == ["enter maintenance mode on DC0_C0_H1"]
        code, out, _ = run_cli(["audit", "--db", str(db), "--object", "s1-7g"])
        assert "power on of VM s1-7g -> success" in out
        code, out, _ = run_cli(["audit", "--db", str(db), "--since", "2999-01-01"])
        assert "no change recorded" in out

        with connect(lab.target()) as session:
            host = resolve_placement(session, lab.placement_names()).hosts["DC0_C0_H1"]
            host_events = _events(lab, host)
        assert any(m.startswith("vgpu drain: enter maintenance mode on DC0_C0_H1 (task-")
                   and "campaign upgrade-550" in m for m in host_events)
        every = _events(lab)
        assert any(m.startswith("vgpu apply: power on of VM s1-7g") for m in every)
        assert any(m.startswith("vgpu destroy: lease of lab vcsim-lab broken") for m in every)


def test_a_command_killed_mid_change_leaves_it_started(tmp_path: Path) -> None:
    db = tmp_path / "audit.db"
    shape = LabShape(hosts=1, method_delays_ms={"PowerOnVM_Task": 20000})
    with VcsimLab(shape) as lab:
        inventory = str(lab.write_inventory(tmp_path / "inv.yaml"))
        env = {**os.environ, "VGPU_AUDIT_DB": str(db), "PYTHONPATH": str(REPO)}
        child = subprocess.Popen(
            [sys.executable, "-m", "vgpu", "apply", "--no-provision", SCENARIO_1, "-i",
             inventory, "--yes"], env=env, cwd=tmp_path,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if db.exists():
                    with ResultStore.open(db) as store:
                        if any(e.change.startswith("power on") for e in
                               store.audit_entries()):
                            break
                time.sleep(0.2)
            child.send_signal(signal.SIGKILL)
        finally:
            child.wait()
        with ResultStore.open(db) as store:
            power_on = [e for e in store.audit_entries() if e.change.startswith("power on")]
        assert [(e.change, e.result, e.ended_at) for e in power_on] == [
            ("power on of VM s1-7g", "started", None)]

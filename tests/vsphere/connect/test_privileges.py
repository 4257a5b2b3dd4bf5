"""Least privilege, checked before any change: the session's privileges on the objects a
command touches, read from vCenter (AuthorizationManager.HasPrivilegeOnEntities, which the
simulator lab answers from the roles and permissions set on its entities)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyVmomi import vim

from tests.cli.invoke import run_cli
from tests.labs.vcsim import VcsimLab, lab_available
from vgpu.vsphere.connect.connection import connect, resolve_placement
from vgpu.vsphere.connect.privileges import HOST_WINDOW, ROLE_PRIVILEGES, Need, missing_privileges

REPO = Path(__file__).resolve().parents[3]


def test_the_shipped_role_is_the_privileges_the_commands_check() -> None:
    role = json.loads((REPO / "docs" / "vgpu-role.json").read_text())
    assert sorted(role["privileges"]) == sorted(ROLE_PRIVILEGES)
    assert "Host.Config.Maintenance" in role["privileges"]


def _grant(lab: VcsimLab, role: str, privileges: list[str]) -> None:
    """What a vCenter administrator does: a role, and a permission for the lab's user on
    the root folder that propagates."""
    with connect(lab.target()) as session:
        content = session.content
        authz = content.authorizationManager
        role_id = authz.AddAuthorizationRole(name=role, privIds=privileges)
        authz.SetEntityPermissions(entity=content.rootFolder, permission=[
            vim.AuthorizationManager.Permission(principal=lab.shape.username, group=False,
                                                roleId=role_id, propagate=True)])


@pytest.mark.vcsim
@pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))
def test_a_role_without_host_maintenance_gets_the_drain_refused_before_any_change(
        vcsim_lab: VcsimLab, tmp_path: Path) -> None:
    inventory = vcsim_lab.write_inventory(tmp_path / "inv.yaml")
    host = "DC0_C0_H0"
    _grant(vcsim_lab, "vgpu-no-maintenance",
           [p for p in ROLE_PRIVILEGES if p != "Host.Config.Maintenance"])
    with connect(vcsim_lab.target()) as session:
        placement = resolve_placement(session, vcsim_lab.placement_names())
        missing = missing_privileges(session, [
            Need(placement.hosts[host], f"host {host}", HOST_WINDOW)])
        assert [(m.what, m.privileges) for m in missing] == [
            (f"host {host}", ("Host.Config.Maintenance",))]
        tasks_before = len(session.content.taskManager.recentTask)

    code, out, err = run_cli(["drain", "--host", host, "-i", str(inventory),
                              "--facts-dir", str(tmp_path / "facts"),
                              "--records-dir", str(tmp_path / "records")])
    assert code == 1, out + err
    assert f"host {host} (host-" in err and "Host.Config.Maintenance" in err
    assert "nothing was changed" in err and "vgpu-role.json" in err
    assert not (tmp_path / "facts").exists() and not (tmp_path / "records").exists()
    with connect(vcsim_lab.target()) as session:
        placement = resolve_placement(session, vcsim_lab.placement_names())
        assert not placement.hosts[host].runtime.inMaintenanceMode
        assert len(session.content.taskManager.recentTask) == tasks_before

    _grant(vcsim_lab, "vgpu", list(ROLE_PRIVILEGES))
    code, out, err = run_cli(["drain", "--host", host, "-i", str(inventory),
                              "--facts-dir", str(tmp_path / "facts"),
                              "--records-dir", str(tmp_path / "records")])
    assert code == 0, out + err

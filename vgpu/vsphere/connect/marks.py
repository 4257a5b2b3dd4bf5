"""A campaign's mark on a host in vCenter: the custom attribute ``vgpu.campaign`` says,
where every engineer of the cluster looks, which campaign holds the host and in which
phase ("campaign 8u3-rollout: drain"). The campaign's state file stays the record; a mark
that cannot be written is a warning, never a stop."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyVmomi import vim, vmodl

from vgpu.vsphere.connect.connection import Session

CAMPAIGN_FIELD = "vgpu.campaign"


def _field_key(session: Session) -> int:
    manager = session.content.customFieldsManager
    for field in manager.field or []:
        if field.name == CAMPAIGN_FIELD and field.managedObjectType in (vim.HostSystem, None):
            return int(field.key)
    try:
        return int(manager.AddCustomFieldDef(name=CAMPAIGN_FIELD, moType=vim.HostSystem).key)
    except vim.fault.DuplicateName:
        return _field_key(session)


def host_marker(session: Session, hosts: dict[str, Any],
                warn: Callable[[str], None]) -> Callable[[str, str], None]:
    """mark(host, text): the host's ``vgpu.campaign`` attribute set to ``text``."""
    key: list[int] = []

    def mark(host: str, text: str) -> None:
        ref = hosts.get(host)
        if ref is None:
            return
        try:
            if not key:
                key.append(_field_key(session))
            session.content.customFieldsManager.SetField(entity=ref, key=key[0], value=text)
        except (vmodl.MethodFault, OSError) as exc:
            warn(f"the mark {CAMPAIGN_FIELD} on {host} was not written ({exc}); the "
                 "campaign's state file still says where it stands")

    return mark


def read_mark(host_ref: Any, session: Session) -> str | None:
    """The host's ``vgpu.campaign`` attribute, if set."""
    key = _field_key(session)
    values = [v.value for v in host_ref.customValue or [] if v.key == key]
    return values[-1] if values else None

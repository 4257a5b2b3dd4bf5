"""The vCenter privileges each command needs, and the check that the session holds them on
the objects it will touch, made before the first change.

vCenter answers AuthorizationManager.HasPrivilegeOnEntities for the logged-in session: for
each object, whether each privilege is granted there (by a permission on the object or one
that propagates from above). A command missing any is refused before it changes anything,
with every missing privilege and object named, so a role without (say) host maintenance
fails at once instead of with NoPermission halfway through a drain. The refusal exits 1
(vCenter would refuse the work; the command's input is fine).

``ROLE_PRIVILEGES`` is the role a vCenter administrator creates for vgpu
(docs/vgpu-role.json, docs/security.md)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pyVmomi import vmodl

from vgpu.errors import RemoteError
from vgpu.vsphere.connect.connection import Session
from vgpu.vsphere.connect.tasks import describe_fault

# Every command reads; vCenter grants these to any role.
READ = ("System.View", "System.Read")
# The audit trail's events on each object changed.
LOG_EVENT = "Global.LogEvent"
# The lab's lease folder and its vgpu.lease attribute; the owner marks on VMs.
LEASE = ("Folder.Create", "Folder.Delete", "Global.ManageCustomFields",
         "Global.SetCustomField", LOG_EVENT)
# Creating VMs from the template and changing, powering and deleting them (in the VM folder:
# the permission propagates to the VMs vgpu creates there).
VM_FOLDER = (
    "VirtualMachine.Inventory.CreateFromExisting", "VirtualMachine.Inventory.Create",
    "VirtualMachine.Inventory.Delete",
    "VirtualMachine.Config.AddRemoveDevice", "VirtualMachine.Config.AdvancedConfig",
    "VirtualMachine.Config.CPUCount", "VirtualMachine.Config.Memory",
    "VirtualMachine.Config.Resource", "VirtualMachine.Config.Settings",
    "VirtualMachine.Config.EditDevice", "VirtualMachine.Config.Annotation",
    "VirtualMachine.Interact.PowerOn", "VirtualMachine.Interact.PowerOff",
    "VirtualMachine.Provisioning.Customize", *LEASE,
)
TEMPLATE = ("VirtualMachine.Provisioning.DeployTemplate", "VirtualMachine.Provisioning.Clone")
RESOURCE_POOL = ("Resource.AssignVMToPool", "Resource.ColdMigrate")
DATASTORE = ("Datastore.AllocateSpace",)
NETWORK = ("Network.Assign",)
CLUSTER = ("Host.Inventory.EditCluster",)  # the manual DRS override of vGPU VMs
# Host settings apply changes (ATS options, the GPU assignment policy, Xorg restarts).
HOST_SETTINGS = ("Host.Config.AdvancedConfig", "Host.Config.Settings",
                 "Host.Config.NetService", LOG_EVENT)
# drain / undrain: maintenance mode, the graphics settings put in effect after a reboot,
# and shutting down vgpu's own VMs on the host.
HOST_WINDOW = ("Host.Config.Maintenance", "Host.Config.Settings", "Host.Config.NetService",
               LOG_EVENT)
VM_POWER = ("VirtualMachine.Interact.PowerOff", LOG_EVENT)

ROLE_PRIVILEGES: tuple[str, ...] = tuple(sorted(set(
    READ + VM_FOLDER + TEMPLATE + RESOURCE_POOL + DATASTORE + NETWORK + CLUSTER
    + HOST_SETTINGS + HOST_WINDOW + VM_POWER)))


@dataclass(frozen=True)
class Need:
    """Privileges a command needs on one object (``what`` names it for a person)."""

    entity: Any
    what: str
    privileges: tuple[str, ...]


@dataclass(frozen=True)
class Missing:
    what: str
    moid: str
    privileges: tuple[str, ...]

    def describe(self) -> str:
        return f"{self.what} ({self.moid}): {', '.join(self.privileges)}"


class PrivilegesMissing(RemoteError):
    """The session lacks privileges the command needs; nothing was changed."""

    def __init__(self, command: str, user: str, missing: list[Missing]) -> None:
        lines = "\n  ".join(m.describe() for m in missing)
        super().__init__(
            f"`{command}` needs privileges that vCenter user {user} does not hold; nothing "
            f"was changed:\n  {lines}\ngive the user the vgpu role (docs/vgpu-role.json, "
            "docs/security.md) on these objects, or on a folder above them with propagation")
        self.missing = missing


def _moid(entity: Any) -> str:
    return str(getattr(entity, "_moId", "?"))


def missing_privileges(session: Session, needs: Iterable[Need]) -> list[Missing]:
    """The privileges of ``needs`` the session does not hold, per object, in one call."""
    needs = [n for n in needs if n.entity is not None]
    if not needs:
        return []
    wanted = sorted({p for n in needs for p in n.privileges})
    entities = list({_moid(n.entity): n.entity for n in needs}.values())
    content = session.content
    try:
        key = content.sessionManager.currentSession.key
        answers = content.authorizationManager.HasPrivilegeOnEntities(
            entity=entities, sessionId=key, privId=wanted)
    except vmodl.MethodFault as exc:
        raise RemoteError(f"vCenter {session.target.host} did not say which privileges the "
                          f"session holds ({describe_fault(exc)}); nothing was changed"
                          ) from None
    granted = {_moid(a.entity): {p.privId for p in a.privAvailability or [] if p.isGranted}
               for a in answers or []}
    out = []
    for need in needs:
        held = granted.get(_moid(need.entity), set())
        lacking = tuple(p for p in need.privileges if p not in held)
        if lacking:
            out.append(Missing(need.what, _moid(need.entity), lacking))
    return out


def require(session: Session, command: str, needs: Iterable[Need]) -> None:
    """Refuse (PrivilegesMissing, exit 1) unless the session holds every privilege."""
    missing = missing_privileges(session, needs)
    if missing:
        raise PrivilegesMissing(command, session.target.user, missing)


def apply_needs(placement: Any, hosts: Iterable[tuple[str, Any]] = ()) -> list[Need]:
    """What `vgpu apply` / `vgpu destroy` touch: the VM folder (VMs, lease, marks), the
    template, resource pool, datastore and network new VMs use, the cluster (DRS overrides)
    and ``hosts`` whose settings change."""
    needs = [
        Need(placement.folder, f"VM folder {placement.folder.name}", VM_FOLDER),
        Need(placement.resource_pool, "resource pool of new VMs", RESOURCE_POOL),
        Need(placement.datastore, f"datastore {placement.datastore.name}", DATASTORE),
        Need(placement.network, f"network {placement.network.name}", NETWORK),
    ]
    if placement.template is not None:
        needs.append(Need(placement.template, f"template {placement.template.name}",
                          TEMPLATE))
    if placement.cluster is not None:
        needs.append(Need(placement.cluster, f"cluster {placement.cluster.name}", CLUSTER))
    needs += [Need(ref, f"host {name}", HOST_SETTINGS) for name, ref in hosts]
    return needs


def check_window(session: Session, command: str, host: str, inventory: Any,
                 inventory_path: Any) -> None:
    """`vgpu drain` / `vgpu undrain`: maintenance and settings on ``host``, power on the
    lab's VM folder (vgpu's VMs on the host are shut down there). A host vCenter does not
    know is left to the command to report."""
    from vgpu.vsphere.connect.connection import resolve_placement
    from vgpu.vsphere.connect.from_inventory import placement_from_inventory

    placement = resolve_placement(session, placement_from_inventory(inventory, inventory_path))
    ref = placement.hosts.get(host)
    if ref is None:
        return
    require(session, f"{command} --host {host}", [
        Need(ref, f"host {host}", HOST_WINDOW),
        Need(placement.folder, f"VM folder {placement.folder.name}", VM_POWER),
    ])

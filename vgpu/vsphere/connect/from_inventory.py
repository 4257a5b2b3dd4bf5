"""Inventory (vgpu.model.inventory) -> the vSphere layer's connection target and placement."""

from __future__ import annotations

from pathlib import Path

from vgpu.errors import InputError
from vgpu.model.inventory import ExposedSecretFile, Inventory
from vgpu.vsphere.connect.connection import VCenterTarget, VmPlacementNames


def require_vcenter(inventory: Inventory, source: Path, scenario_id: str | None = None) -> None:
    """Refuse an inventory without a vCenter before anything else is checked against it: a
    vSphere scenario's hosts are the vCenter's ESXi hosts, never its bare-metal ones."""
    if inventory.vcenter is not None and inventory.placement is not None:
        return
    what = f"scenario {scenario_id} creates vSphere VMs, and " if scenario_id else ""
    bare = [b.name for b in inventory.bare_metal]
    has = f" (it lists only bare-metal hosts: {', '.join(bare)})" if bare else ""
    raise InputError.single(
        str(source), "vcenter", f"{what}the inventory names no vCenter{has}",
        fix="add vcenter (host, user, password) and placement, or use a vSphere inventory "
            "such as inventory/sim.yaml")


def target_from_inventory(inventory: Inventory, source: Path) -> VCenterTarget:
    """Connection settings with the password read from its env var or file now."""
    require_vcenter(inventory, source)
    vc = inventory.vcenter
    assert vc is not None
    try:
        password = vc.password.reveal(base_dir=source.parent)
    except ExposedSecretFile as exc:
        raise InputError.single(str(exc.path), "vcenter.password", str(exc),
                                fix=f"{exc.fix} (it is named in {source})") from None
    except (KeyError, OSError, IndexError) as exc:
        raise InputError.single(
            str(source), "vcenter.password",
            f"cannot read the password from {vc.password.describe()}: {exc}",
            fix="export the variable or create the file (vgpu sim up prints both for the lab)",
        ) from None
    ca_bundle = vc.ca_bundle
    if ca_bundle:
        path = Path(ca_bundle).expanduser()
        ca_bundle = str(path if path.is_absolute() else source.parent / path)
    return VCenterTarget(
        host=vc.host, port=vc.port, user=vc.user, password=password, protocol=vc.protocol,
        verify_tls=vc.verify_tls, ca_bundle=ca_bundle, source=str(source),
        thumbprint=vc.thumbprint, insecure_http=vc.insecure_http,
    )


def placement_from_inventory(inventory: Inventory, source: Path) -> VmPlacementNames:
    p = inventory.placement
    if p is None:
        raise InputError.single(str(source), "placement", "the inventory has no placement",
                                fix="add placement: datacenter, cluster, datastore, network, "
                                    "template")
    if p.template is None:
        raise InputError.single(
            str(source), "placement.template",
            "apply clones VMs from a template; OVF and ISO sources are not supported yet",
            fix="name a VM template (EFI firmware, VMware Tools installed)")
    return VmPlacementNames(
        datacenter=p.datacenter, datastore=p.datastore, network=p.network, template=p.template,
        cluster=p.cluster, folder=p.folder, resource_pool=p.resource_pool, source=str(source),
        lab=inventory.lab_name,
    )

"""Log in to vCenter with pyvmomi and find the objects an inventory names.

TLS certificates are verified unless the inventory turns that off explicitly; passwords
come from an environment variable or a file (the inventory's ``Secret``), never inline.
"""

from __future__ import annotations

import http.client
import ssl
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from pyVim.connect import Disconnect, SmartConnect
from pyVmomi import vim, vmodl

from vgpu.errors import InputError, RemoteError
from vgpu.vsphere.collect import retrieve_all
from vgpu.vsphere.tasks import describe_fault


@dataclass(frozen=True)
class VCenterTarget:
    """How to reach and log in to one vCenter. ``source`` names the file it came from."""

    host: str
    user: str
    password: str = field(repr=False)
    port: int = 443
    protocol: str = "https"
    verify_tls: bool = True
    ca_bundle: str | None = None
    source: str = "inventory"
    timeout_s: float = 30.0

    @property
    def address(self) -> str:
        return f"{self.protocol}://{self.host}:{self.port}"


@dataclass(frozen=True)
class PlacementNames:
    """Names of the vCenter objects new VMs use, as the inventory gives them."""

    datacenter: str
    datastore: str
    network: str
    template: str | None = None
    cluster: str | None = None
    folder: str | None = None
    resource_pool: str | None = None
    source: str = "inventory"
    lab: str = ""  # the inventory's lab (Inventory.lab_name); "" where none is named


@dataclass
class Placement:
    """The objects ``PlacementNames`` resolved to."""

    datacenter: Any
    datastore: Any
    network: Any
    template: Any | None
    folder: Any
    resource_pool: Any
    cluster: Any | None
    hosts: dict[str, Any]
    lab: str = ""


@dataclass
class Session:
    """A logged-in vCenter connection."""

    si: Any
    target: VCenterTarget
    content: Any = None

    def __post_init__(self) -> None:
        if self.content is None:
            self.content = self.si.RetrieveContent()

    def collect(
        self, root: Any, obj_type: Any, paths: list[str],
    ) -> list[tuple[Any, dict[str, Any]]]:
        """Read ``paths`` of every ``obj_type`` under ``root`` in one property-collector call."""
        content = self.content
        view = content.viewManager.CreateContainerView(root, [obj_type], True)
        try:
            traversal = vmodl.query.PropertyCollector.TraversalSpec(
                name="view", path="view", skip=False, type=vim.view.ContainerView)
            spec = vmodl.query.PropertyCollector.FilterSpec(
                objectSet=[vmodl.query.PropertyCollector.ObjectSpec(
                    obj=view, skip=True, selectSet=[traversal])],
                propSet=[vmodl.query.PropertyCollector.PropertySpec(
                    type=obj_type, pathSet=paths, all=False)],
            )
            return retrieve_all(content.propertyCollector, spec)
        finally:
            view.Destroy()

    def by_name(self, root: Any, obj_type: Any) -> dict[str, Any]:
        return {props["name"]: obj for obj, props in self.collect(root, obj_type, ["name"])
                if "name" in props}


def widen_connection_pool(managed_object: Any, size: int) -> None:
    """Keep up to ``size`` HTTP connections to vCenter open between calls.

    pyVmomi keeps 5 and closes every connection returned beyond that: with 64 workers
    most calls would open a new connection (a TLS handshake each on a real vCenter)."""
    stub = getattr(managed_object, "_stub", None)
    if stub is not None and isinstance(getattr(stub, "poolSize", None), int):
        stub.poolSize = max(stub.poolSize, size)


def _ssl_context(target: VCenterTarget) -> ssl.SSLContext | None:
    if target.protocol != "https" or not target.verify_tls:
        return None
    try:
        return ssl.create_default_context(cafile=target.ca_bundle)
    except (OSError, ssl.SSLError) as exc:
        raise InputError.single(
            target.source, "vcenter.ca_bundle", f"cannot read CA bundle {target.ca_bundle}: {exc}",
            fix="point ca_bundle at a PEM file with the CA that signed vCenter's certificate",
        ) from None


def _login(target: VCenterTarget) -> Any:
    try:
        return SmartConnect(
            protocol=target.protocol, host=target.host, port=target.port, user=target.user,
            pwd=target.password, sslContext=_ssl_context(target),
            disableSslCertValidation=target.protocol == "https" and not target.verify_tls,
            httpConnectionTimeout=target.timeout_s,
        )
    except vim.fault.InvalidLogin:
        raise InputError.single(
            target.source, "vcenter.user / vcenter.password",
            f"vCenter {target.address} refused the login of user '{target.user}'",
            fix="check the user name and the password source the inventory names",
        ) from None
    except ssl.SSLCertVerificationError as exc:
        raise RemoteError(
            f"the TLS certificate of {target.address} could not be verified "
            f"({exc.verify_message}); set vcenter.ca_bundle in {target.source} to the CA "
            "that signed it, or verify_tls: false for a lab with a self-signed certificate"
        ) from None
    except (http.client.HTTPException, ssl.SSLError, OSError) as exc:
        raise RemoteError(
            f"cannot reach vCenter at {target.address}: {exc} "
            f"(check vcenter.host/port/protocol in {target.source} and that it is running)"
        ) from None


@contextmanager
def connect(target: VCenterTarget) -> Iterator[Session]:
    """Log in; log out when the block ends, even on error."""
    si = _login(target)
    try:
        yield Session(si=si, target=target)
    except (vmodl.MethodFault, http.client.HTTPException, OSError) as exc:
        # A fault or a dropped connection while reading: say where, not a traceback.
        raise RemoteError(f"vCenter {target.address}: {describe_fault(exc)}: {exc}") from exc
    finally:
        # Logging out of a server that went away must not hide the error that ended the block.
        with suppress(Exception):
            Disconnect(si)


def _missing(names: PlacementNames, field_name: str, wanted: str, kind: str,
             existing: list[str], where: str) -> InputError:
    listed = ", ".join(sorted(existing)) or "none"
    return InputError.single(
        names.source, f"placement.{field_name}",
        f"no {kind} '{wanted}' in {where}; it has: {listed}",
        fix=f"use one of the existing {kind}s or create '{wanted}' first",
    )


def resolve_placement(session: Session, names: PlacementNames) -> Placement:
    """Find every object ``names`` refers to, or say which is missing and what exists."""
    content = session.content
    datacenters = session.by_name(content.rootFolder, vim.Datacenter)
    dc = datacenters.get(names.datacenter)
    if dc is None:
        raise _missing(names, "datacenter", names.datacenter, "datacenter",
                       list(datacenters), f"vCenter {session.target.host}")
    where = f"datacenter {names.datacenter}"

    clusters = session.by_name(dc.hostFolder, vim.ClusterComputeResource)
    cluster = None
    if names.cluster:
        cluster = clusters.get(names.cluster)
        if cluster is None:
            raise _missing(names, "cluster", names.cluster, "cluster", list(clusters), where)
    host_root = cluster if cluster is not None else dc.hostFolder
    hosts = session.by_name(host_root, vim.HostSystem)

    datastores = {ds.name: ds for ds in dc.datastore}
    datastore = datastores.get(names.datastore)
    if datastore is None:
        raise _missing(names, "datastore", names.datastore, "datastore", list(datastores), where)

    networks = {net.name: net for net in dc.network}
    network = networks.get(names.network)
    if network is None:
        raise _missing(names, "network", names.network, "network", list(networks), where)

    template = None
    if names.template:
        vms = session.collect(dc.vmFolder, vim.VirtualMachine, ["name", "config.template"])
        # A plain VM can be cloned too, so any VM of that name will do.
        template = next((obj for obj, props in vms if props.get("name") == names.template), None)
        if template is None:
            templates = [p["name"] for _, p in vms if p.get("config.template") and "name" in p]
            raise _missing(names, "template", names.template, "VM template", templates, where)

    folder = dc.vmFolder
    if names.folder:
        folders = session.by_name(dc.vmFolder, vim.Folder)
        folder = folders.get(names.folder)
        if folder is None:
            raise _missing(names, "folder", names.folder, "VM folder", list(folders), where)

    pool = _resource_pool(session, names, cluster, hosts, where)
    return Placement(datacenter=dc, datastore=datastore, network=network, template=template,
                     folder=folder, resource_pool=pool, cluster=cluster, hosts=hosts,
                     lab=names.lab)


def _resource_pool(session: Session, names: PlacementNames, cluster: Any | None,
                   hosts: dict[str, Any], where: str) -> Any:
    if names.resource_pool:
        root = cluster if cluster is not None else session.content.rootFolder
        pools = session.by_name(root, vim.ResourcePool)
        pool = pools.get(names.resource_pool)
        if pool is None:
            raise _missing(names, "resource_pool", names.resource_pool, "resource pool",
                           list(pools), where)
        return pool
    if cluster is not None:
        return cluster.resourcePool
    if hosts:
        return next(iter(hosts.values())).parent.resourcePool
    raise _missing(names, "cluster", "(any)", "host", [], where)

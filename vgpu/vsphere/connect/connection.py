"""Log in to vCenter with pyvmomi and find the objects an inventory names.

vCenter is trusted by a CA bundle (or the system's CAs) or by a pinned certificate
(``vcenter.thumbprint: sha256:...``, written by `vgpu inventory trust`): a pinned
certificate that changed is refused, naming both thumbprints. Verification off
(``verify_tls: false``) and plain http (``insecure_http: true``) stay possible and are
warned on every run. Passwords come from an environment variable or a file (the
inventory's ``Secret``), never inline.
"""

from __future__ import annotations

import hashlib
import http.client
import socket
import ssl
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from pyVim.connect import Disconnect, SmartConnect
from pyVmomi import vim, vmodl

from vgpu.errors import InputError, RemoteError
from vgpu.vsphere.connect import audit
from vgpu.vsphere.connect.collect import retrieve_all
from vgpu.vsphere.connect.tasks import describe_fault


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
    thumbprint: str | None = None  # sha256:<64 hex>: the pinned certificate
    insecure_http: bool = False  # plain http allowed (protocol http needs it)

    @property
    def address(self) -> str:
        return f"{self.protocol}://{self.host}:{self.port}"


THUMBPRINT_PREFIX = "sha256:"


def sha256_thumbprint(der: bytes) -> str:
    """``sha256:<64 lowercase hex>`` of a DER certificate (how the inventory pins it)."""
    return THUMBPRINT_PREFIX + hashlib.sha256(der).hexdigest()


@dataclass(frozen=True)
class PeerCertificate:
    """The certificate a server presented, read without trusting it."""

    der: bytes
    subject: str
    issuer: str
    not_before: str
    not_after: str

    @property
    def thumbprint(self) -> str:
        return sha256_thumbprint(self.der)

    def describe(self) -> list[str]:
        return [f"subject:    {self.subject}", f"issuer:     {self.issuer}",
                f"valid from: {self.not_before}", f"valid to:   {self.not_after}",
                f"thumbprint: {self.thumbprint}"]


def read_peer_certificate(host: str, port: int, timeout_s: float = 30.0) -> PeerCertificate:
    """Connect to ``host:port`` with TLS, take the certificate it presents and hang up:
    nothing is sent, so no secret can reach a server not yet trusted."""
    from cryptography import x509

    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection((host, port), timeout=timeout_s) as raw, \
            context.wrap_socket(raw, server_hostname=host) as tls:
        der = tls.getpeercert(binary_form=True)
    if not der:
        raise RemoteError(f"{host}:{port} presented no TLS certificate")
    cert = x509.load_der_x509_certificate(der)
    return PeerCertificate(
        der=der, subject=cert.subject.rfc4514_string(), issuer=cert.issuer.rfc4514_string(),
        not_before=f"{cert.not_valid_before_utc:%Y-%m-%d %H:%M:%S} UTC",
        not_after=f"{cert.not_valid_after_utc:%Y-%m-%d %H:%M:%S} UTC")


def insecurity_warnings(target: VCenterTarget) -> list[str]:
    """What the target's settings leave unprotected; printed on every run that uses them."""
    if target.protocol == "http":
        return [f"vCenter {target.address} is reached over plain http (insecure_http: true "
                f"in {target.source}): the password and every answer cross the network "
                "unencrypted"]
    if not target.verify_tls:
        return [f"vCenter {target.address}'s certificate is not verified (verify_tls: false "
                f"in {target.source}): anyone on the path can pose as it; pin it instead "
                "with `vgpu inventory trust`"]
    return []


@dataclass(frozen=True)
class VmPlacementNames:
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
class VmPlacementObjects:
    """The objects ``VmPlacementNames`` resolved to."""

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


def pinned_context(der: bytes) -> ssl.SSLContext:
    """A context that trusts exactly the certificate ``der`` (every connection of the
    session, pooled ones too): it is the only trust anchor, a partial chain may end at it,
    and the host name is not checked (the pin says which server this is)."""
    context = ssl.create_default_context(cadata=ssl.DER_cert_to_PEM_cert(der))
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    context.check_hostname = False
    return context


def _ssl_context(target: VCenterTarget, pinned: bytes | None = None) -> ssl.SSLContext | None:
    if target.protocol != "https" or not target.verify_tls:
        return None
    if pinned is not None:
        return pinned_context(pinned)
    try:
        return ssl.create_default_context(cafile=target.ca_bundle)
    except (OSError, ssl.SSLError) as exc:
        raise InputError.single(
            target.source, "vcenter.ca_bundle", f"cannot read CA bundle {target.ca_bundle}: {exc}",
            fix="point ca_bundle at a PEM file with the CA that signed vCenter's certificate",
        ) from None


def _refuse_plain_http(target: VCenterTarget) -> None:
    if target.protocol == "http" and not target.insecure_http:
        raise InputError.single(
            target.source, "vcenter.protocol",
            f"protocol http sends the vCenter password unencrypted to {target.host}",
            fix="use https (the default); for a lab without TLS add insecure_http: true")


def check_pin(target: VCenterTarget) -> bytes | None:
    """The pinned certificate as the server presents it (None without a pin); refused
    before the password is sent when it is not the pinned one, naming both thumbprints."""
    if not target.thumbprint or target.protocol != "https":
        return None
    try:
        seen = read_peer_certificate(target.host, target.port, target.timeout_s)
    except (OSError, ssl.SSLError) as exc:
        raise RemoteError(
            f"cannot reach vCenter at {target.address}: {exc} "
            f"(check vcenter.host/port/protocol in {target.source} and that it is running)"
        ) from None
    if seen.thumbprint != target.thumbprint:
        raise RemoteError(
            f"the certificate of {target.address} changed: it presents {seen.thumbprint}, "
            f"{target.source} pins {target.thumbprint}; nothing was sent to it. If vCenter's "
            "certificate was renewed, check the new one with its administrator and run "
            "`vgpu inventory trust` to pin it; otherwise someone may be posing as vCenter")
    return seen.der


def _login(target: VCenterTarget) -> Any:
    _refuse_plain_http(target)
    pinned = check_pin(target)
    try:
        return SmartConnect(
            protocol=target.protocol, host=target.host, port=target.port, user=target.user,
            pwd=target.password, sslContext=_ssl_context(target, pinned),
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
        if pinned is not None:  # the certificate changed since the pin was checked
            raise RemoteError(f"the certificate of {target.address} is no longer the one "
                              f"{target.source} pins ({target.thumbprint})") from None
        raise RemoteError(
            f"the TLS certificate of {target.address} could not be verified "
            f"({exc.verify_message}); set vcenter.ca_bundle in {target.source} to the CA "
            "that signed it, or pin the certificate itself: `vgpu inventory trust` shows it "
            "and writes vcenter.thumbprint (verify_tls: false would trust anyone on the path)"
        ) from None
    except (http.client.HTTPException, ssl.SSLError, OSError) as exc:
        raise RemoteError(
            f"cannot reach vCenter at {target.address}: {exc} "
            f"(check vcenter.host/port/protocol in {target.source} and that it is running)"
        ) from None


@contextmanager
def connect(target: VCenterTarget) -> Iterator[Session]:
    """Log in; log out when the block ends, even on error."""
    for warning in insecurity_warnings(target):
        print(f"warning: {warning}", file=sys.stderr)
    si = _login(target)
    session: Session | None = None
    try:
        session = Session(si=si, target=target)
        audit.bind(session)
        yield session
    except (vmodl.MethodFault, http.client.HTTPException, OSError) as exc:
        # A fault or a dropped connection while reading: say where, not a traceback.
        raise RemoteError(f"vCenter {target.address}: {describe_fault(exc)}: {exc}") from exc
    finally:
        # Logging out of a server that went away must not hide the error that ended the block.
        if session is not None:
            audit.unbind(session)
        with suppress(Exception):
            Disconnect(si)


def _missing(names: VmPlacementNames, field_name: str, wanted: str, kind: str,
             existing: list[str], where: str) -> InputError:
    listed = ", ".join(sorted(existing)) or "none"
    return InputError.single(
        names.source, f"placement.{field_name}",
        f"no {kind} '{wanted}' in {where}; it has: {listed}",
        fix=f"use one of the existing {kind}s or create '{wanted}' first",
    )


def resolve_placement(session: Session, names: VmPlacementNames) -> VmPlacementObjects:
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
    return VmPlacementObjects(datacenter=dc, datastore=datastore, network=network,
                              template=template, folder=folder, resource_pool=pool,
                              cluster=cluster, hosts=hosts, lab=names.lab)


def _resource_pool(session: Session, names: VmPlacementNames, cluster: Any | None,
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

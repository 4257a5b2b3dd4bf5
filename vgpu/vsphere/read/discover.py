"""Read a vCenter into a first inventory: datacenter, cluster, hosts with their NVIDIA GPUs
(model from the PCI device id) and vGPU types, datastores, networks and template
candidates, each read in one property-collector call. What vCenter cannot know (the IP pool
for new VMs, the guests' SSH user and key, driver files) is left as a TODO comment."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pyVmomi import vim

from vgpu import mig
from vgpu.errors import ParameterError
from vgpu.vsphere.connect.connection import Session, VCenterTarget
from vgpu.vsphere.read.facts import GpuDevice, HostFacts, read_hosts

PREFERRED_NETWORK = "VM Network"
VCENTER = "vCenter"  # the parameters of a discovery: which vCenter, which cluster of it
CLUSTER = "cluster"
DEFAULT_FORM_FACTOR = "pcie"  # the inventory's gpus[].form_factor default
GIB = 1024 ** 3


@dataclass(frozen=True)
class Datastore:
    name: str
    free_gb: int
    capacity_gb: int
    accessible: bool


@dataclass(frozen=True)
class Template:
    name: str
    firmware: str


@dataclass
class Discovery:
    """What one datacenter (and one cluster in it, if any) holds."""

    about: str
    datacenter: str
    other_datacenters: list[str]
    cluster: str | None
    clusters: list[str]
    hosts: list[HostFacts]
    datastores: list[Datastore]
    networks: list[str]
    templates: list[Template] = field(default_factory=list)


@dataclass(frozen=True)
class Login:
    """How the written inventory reaches vCenter (the password only by reference)."""

    target: VCenterTarget
    password_env: str
    ca_file: str | None


def discover(session: Session, cluster: str | None) -> Discovery:
    content = session.content
    datacenters = session.by_name(content.rootFolder, vim.Datacenter)
    if not datacenters:
        raise ParameterError(VCENTER, f"vCenter {session.target.address} has no datacenter",
                             "point it at the vCenter that holds the GPU hosts")
    dc_name, cluster_name, root = _choose(session, datacenters, cluster)
    dc = datacenters[dc_name]
    return Discovery(
        about=content.about.fullName,
        datacenter=dc_name,
        other_datacenters=sorted(set(datacenters) - {dc_name}),
        cluster=cluster_name,
        clusters=sorted(session.by_name(dc.hostFolder, vim.ClusterComputeResource)),
        hosts=sorted(read_hosts(session, root, {}).values(), key=lambda h: h.name),
        datastores=_datastores(session, dc),
        networks=sorted(session.by_name(dc.networkFolder, vim.Network)),
        templates=_templates(session, dc),
    )


def _choose(session: Session, datacenters: dict[str, Any],
            wanted: str | None) -> tuple[str, str | None, Any]:
    """Datacenter, cluster and the folder to read hosts from: the named cluster, else the
    first cluster with an NVIDIA GPU, else the first datacenter's host folder."""
    found: list[tuple[str, str, Any]] = []
    for dc_name in sorted(datacenters):
        clusters = session.by_name(datacenters[dc_name].hostFolder, vim.ClusterComputeResource)
        found += [(dc_name, name, clusters[name]) for name in sorted(clusters)]
    if wanted is not None:
        for dc_name, name, ref in found:
            if name == wanted:
                return dc_name, name, ref
        raise ParameterError(CLUSTER, f"no cluster named '{wanted}'",
                             "use one of: " + (", ".join(n for _, n, _ in found)
                                               or "none (name no cluster)"))
    for dc_name, name, ref in found:
        if any(h.gpus for h in read_hosts(session, ref, {}).values()):
            return dc_name, name, ref
    if found:
        return found[0]
    first = sorted(datacenters)[0]
    return first, None, datacenters[first].hostFolder


def _datastores(session: Session, dc: Any) -> list[Datastore]:
    paths = ["name", "summary.freeSpace", "summary.capacity", "summary.accessible"]
    stores = [Datastore(props["name"], int(props.get("summary.freeSpace") or 0) // GIB,
                        int(props.get("summary.capacity") or 0) // GIB,
                        bool(props.get("summary.accessible", True)))
              for _, props in session.collect(dc.datastoreFolder, vim.Datastore, paths)]
    # Best first: reachable, then most free space.
    return sorted(stores, key=lambda d: (not d.accessible, -d.free_gb, d.name))


def _templates(session: Session, dc: Any) -> list[Template]:
    paths = ["name", "config.template", "config.firmware"]
    found = [Template(props["name"], str(props.get("config.firmware") or "bios"))
             for _, props in session.collect(dc.vmFolder, vim.VirtualMachine, paths)
             if props.get("config.template")]
    # vGPU VMs need EFI firmware: EFI templates first.
    return sorted(found, key=lambda t: (t.firmware != "efi", t.name))


# --- the inventory text ---------------------------------------------------------------


def _v(value: object) -> str:
    """A YAML value: JSON is YAML, and quotes every string that needs it."""
    return json.dumps(value)


def render_inventory(found: Discovery, login: Login) -> str:
    lines = [
        f"# vgpu inventory discovered from {login.target.address} ({found.about})",
        "# by `vgpu inventory discover`. Check the choices, fill in every TODO, then run",
        "# `vgpu preflight -i THIS-FILE --scenario ID`.",
        f"name: {_v(found.cluster or found.datacenter)}",
        f"description: {_v(_description(found, login))}",
        *_vcenter_lines(login),
        *_placement_lines(found),
        *_host_lines(found.hosts),
        *_todo_lines(),
    ]
    return "\n".join(lines) + "\n"


def _description(found: Discovery, login: Login) -> str:
    gpus = sum(len(_catalogued(h.gpus)) for h in found.hosts)
    where = f"cluster {found.cluster}" if found.cluster else "no cluster"
    return (f"discovered from {login.target.address}: datacenter {found.datacenter}, {where}, "
            f"{len(found.hosts)} host(s), {gpus} NVIDIA GPU(s) vgpu knows")


def _vcenter_lines(login: Login) -> list[str]:
    t = login.target
    lines = ["vcenter:", f"  host: {_v(t.host)}", f"  port: {t.port}", f"  user: {_v(t.user)}",
             f"  password: {{env: {_v(login.password_env)}}}   # export {login.password_env}"
             " before use; a password is never written inline",
             f"  protocol: {_v(t.protocol)}"]
    if t.protocol == "http":
        lines.append("  insecure_http: true   # discovered over http: the password crosses "
                     "the network unencrypted")
    if login.ca_file:
        lines.append(f"  ca_bundle: {_v(login.ca_file)}")
    elif not t.verify_tls and t.protocol == "https":
        lines.append("  verify_tls: false   # discovered with --insecure: run `vgpu "
                     "inventory trust` to pin the certificate instead")
    return lines


def _placement_lines(found: Discovery) -> list[str]:
    lines = ["placement:",
             f"  datacenter: {_v(found.datacenter)}" + _others(found.other_datacenters,
                                                           "other datacenters")]
    if found.cluster:
        lines.append(f"  cluster: {_v(found.cluster)}"
                     + _others([c for c in found.clusters if c != found.cluster],
                               "other clusters"))
    if found.datastores:
        best = found.datastores[0]
        shown = ", ".join(f"{d.name} ({d.free_gb} of {d.capacity_gb} GB free"
                          f"{'' if d.accessible else ', not accessible'})"
                          for d in found.datastores)
        lines.append(f"  datastore: {_v(best.name)}   # most free space; all: {shown}")
    else:
        lines.append('  datastore: "TODO"   # TODO: vCenter lists no datastore here')
    network = PREFERRED_NETWORK if PREFERRED_NETWORK in found.networks else \
        (found.networks[0] if found.networks else "TODO")
    lines.append(f"  network: {_v(network)}   # networks: {', '.join(found.networks) or 'none'}")
    if found.templates:
        shown = ", ".join(f"{t.name} ({t.firmware})" for t in found.templates)
        lines.append(f"  template: {_v(found.templates[0].name)}   # template candidates: "
                     f"{shown}")
    else:
        lines.append('  template: "TODO"   # TODO: no VM template found; name one (EFI '
                     "firmware, VMware Tools, the guests' SSH key)")
    return lines


def _others(names: list[str], what: str) -> str:
    return f"   # {what}: {', '.join(names)}" if names else ""


def _catalogued(gpus: list[GpuDevice]) -> list[tuple[GpuDevice, mig.GpuModel]]:
    out = []
    for gpu in gpus:
        model = mig.gpu_model_for_pci(gpu.device_id)
        if model is not None:
            out.append((gpu, model))
    return out


def _host_lines(hosts: list[HostFacts]) -> list[str]:
    with_gpus = [h for h in hosts if _catalogued(h.gpus)]
    lines = ["hosts:" if with_gpus else "hosts: []"]
    skipped = [h.name for h in hosts if h not in with_gpus]
    if skipped:
        lines.insert(0, f"# hosts without an NVIDIA GPU vgpu knows, left out: {', '.join(skipped)}")
    for host in with_gpus:
        lines += _one_host(host)
    return lines


def _one_host(host: HostFacts) -> list[str]:
    state = host.state_problem() or "connected"
    types = ", ".join(host.vgpu_types) or "none (install the NVIDIA host driver VIB)"
    lines = [f"  # ESXi {host.version} build {host.build}, {state}",
             f"  # vGPU types offered: {types}",
             f"  - name: {_v(host.name)}", "    gpus:"]
    # One entry per model and form factor: the form factor picks the vGPU board code.
    by_model: dict[tuple[str, str | None], list[str]] = {}
    for gpu, model in _catalogued(host.gpus):
        variant = model.variant_for_pci(gpu.device_id)
        form = variant.form_factor if variant else None
        by_model.setdefault((model.key, form), []).append(gpu.pci_id)
    for (key, form), pci_ids in by_model.items():
        shown = f", form_factor: {_v(form)}" if form and form != DEFAULT_FORM_FACTOR else ""
        board = f"   # vGPU board {mig.gpu_model(key).board_for_form_factor(form)}" \
            if form else ""
        lines.append(f"      - {{model: {_v(key)}, count: {len(pci_ids)}, "
                     f"pci_ids: {_v(pci_ids)}{shown}}}{board}")
    unknown = Counter(f"0x{g.device_id:04X}" for g in host.gpus
                      if mig.gpu_model_for_pci(g.device_id) is None)
    for device, n in unknown.items():
        lines.append(f"      # left out: {n} NVIDIA device(s) {device}, not in vgpu's catalogue")
    lines.append("    # TODO: vCenter does not show NVLink bridges; add nvlink_pairs: [[0, 1]] "
                 "to a gpus entry where they exist")
    return lines


def _todo_lines() -> list[str]:
    return [
        "network:",
        "  # TODO: the IP pool for the VMs vgpu creates (vCenter cannot know which addresses",
        "  # are free), e.g. ip_pool: {start: 10.0.0.11, end: 10.0.0.40, netmask: "
        "255.255.255.0, gateway: 10.0.0.1}",
        "  ip_pool: null",
        "ssh:",
        "  # TODO: the user and key the template's guests accept, and the known_hosts file",
        '  user: "vgpu"',
        "  key_file: null",
        '  known_hosts: "~/.ssh/known_hosts"',
        "drivers:",
        "  # TODO: the NVIDIA vGPU guest driver (.run file or URL) and the licence token",
        "  # (.tok) that provisioning installs",
        "  guest_driver: null",
        "  licence_token: null",
    ]

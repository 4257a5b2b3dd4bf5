"""Inventory: where scenarios run. A vCenter with ESXi hosts and their GPUs, IP addresses
for the VMs, SSH defaults, and bare-metal hosts. Secrets are never inline: the inventory
names an environment variable or a file that holds them."""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from vgpu import mig
from vgpu.container.docker import DockerCli
from vgpu.model.base import FileModel, StrictModel
from vgpu.model.names import MAX_NAME_LENGTH, Name


class ExposedSecretFile(PermissionError):
    """A secret's file that group or others may read (refused, as ssh refuses such a key)."""

    def __init__(self, path: Path, mode: int) -> None:
        super().__init__(f"{path} is readable by group or others (mode {mode:04o}); a "
                         "secret's file must be private to its owner")
        self.path = path
        self.mode = mode

    @property
    def fix(self) -> str:
        return f"chmod 600 {self.path}"


def check_private(path: Path) -> None:
    """Raise ExposedSecretFile when ``path`` grants any permission to group or others."""
    mode = path.stat().st_mode & 0o7777
    if mode & 0o077:
        raise ExposedSecretFile(path, mode)


class Secret(StrictModel):
    """A secret read at run time from an environment variable or a file."""

    env: str | None = Field(None, description="environment variable holding the secret")
    file: str | None = Field(None, description="file whose first line is the secret")

    @model_validator(mode="before")
    @classmethod
    def _not_inline(cls, value: object) -> object:
        if isinstance(value, str | int | float):
            raise ValueError("a secret is never written inline; use {env: VAR} or {file: path}")
        return value

    @model_validator(mode="after")
    def _one_source(self) -> Secret:
        if bool(self.env) == bool(self.file):
            raise ValueError("give exactly one of 'env' or 'file' (secrets are never inline)")
        return self

    def reveal(self, base_dir: Path | None = None) -> str:
        """Read the secret. Raises KeyError/FileNotFoundError with the source named, and
        ExposedSecretFile for a file group or others may read."""
        if self.env:
            value = os.environ.get(self.env)
            if value is None:
                raise KeyError(f"environment variable {self.env} is not set")
            return value
        assert self.file is not None
        path = Path(os.path.expanduser(self.file))
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        check_private(path)
        return path.read_text(encoding="utf-8").splitlines()[0].strip()

    def describe(self) -> str:
        return f"env {self.env}" if self.env else f"file {self.file}"


THUMBPRINT = re.compile(r"^sha256:[0-9a-f]{64}$")


class VCenter(StrictModel):
    host: str = Field(description="vCenter (or ESXi) address")
    port: int = Field(443, ge=1, le=65535)
    user: str = Field(description="a lab account holding the vgpu role (docs/security.md), "
                      "not the SSO administrator")
    password: Secret = Field(description="where the password is read from: {env: VAR} or "
                                         "{file: path}")
    verify_tls: bool = Field(True, description="verify the server certificate; false trusts "
                             "anyone on the path and is warned on every run: prefer "
                             "ca_bundle or thumbprint")
    ca_bundle: str | None = Field(None, description="PEM file with the CA that signed vCenter")
    thumbprint: str | None = Field(
        None, description="sha256:<64 hex> of vCenter's certificate: trust exactly that "
        "certificate (a self-signed one); `vgpu inventory trust` shows it and writes this")
    protocol: Literal["https", "http"] = "https"
    insecure_http: bool = Field(False, description="allow protocol: http (the password "
                                "crosses the network unencrypted; warned on every run)")

    @field_validator("thumbprint", mode="before")
    @classmethod
    def _thumbprint(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        text = value.strip().lower()
        digest = text.removeprefix("sha256:").replace(":", "")
        normal = f"sha256:{digest}"
        if not THUMBPRINT.match(normal):
            raise PydanticCustomError("vgpu_thumbprint", "{message}", {
                "message": f"'{value}' is not a SHA-256 certificate thumbprint",
                "fix": "write sha256: and the 64 hex digits (colons allowed), as `vgpu "
                       "inventory trust` shows them"})
        return normal

    @model_validator(mode="after")
    def _transport(self) -> VCenter:
        if self.protocol == "http" and not self.insecure_http:
            raise PydanticCustomError("vgpu_plain_http", "{message}", {
                "message": "protocol: http sends the vCenter password unencrypted",
                "fix": "use https (the default); for a lab without TLS add insecure_http: "
                       "true"})
        if self.thumbprint and not self.verify_tls:
            raise PydanticCustomError("vgpu_pin_unverified", "{message}", {
                "message": "thumbprint pins the certificate and verify_tls: false turns "
                           "checking off",
                "fix": "remove verify_tls: false (the pin is the check)"})
        return self


class VmPlacement(StrictModel):
    """Where new VMs go in vCenter."""

    datacenter: str
    cluster: str | None = None
    datastore: str
    network: str
    folder: str | None = None
    resource_pool: str | None = None
    template: str | None = Field(None, description="VM template to clone (EFI firmware)")
    ovf: str | None = Field(None, description="OVF/OVA file to deploy instead of a template")
    iso: str | None = Field(None, description="ISO to attach to newly created VMs")
    guest_id: str = Field("ubuntu64Guest", description="guest OS id for created VMs")
    image_managed: bool | None = Field(
        None, description="the cluster's hosts are managed with a vSphere Lifecycle Manager "
        "image (true) or with baselines (false): a missing NVIDIA host driver is then fixed "
        "through the image (add the component, remediate), never with esxcli, which would "
        "make the host non-compliant; unset: both fixes are named")

    @model_validator(mode="after")
    def _one_source(self) -> VmPlacement:
        if sum(x is not None for x in (self.template, self.ovf, self.iso)) != 1:
            raise ValueError("give exactly one VM source: 'template', 'ovf' or 'iso'")
        return self


class GpuInventory(StrictModel):
    """The GPUs of one model in one host."""

    model: str = Field(description=f"one of {', '.join(mig.gpu_model_names())}")
    count: int = Field(1, ge=1, le=16)
    pci_ids: list[str] = Field(default_factory=list,
                               description="PCI addresses in GPU index order, e.g. 0000:17:00.0")
    nvlink_pairs: list[tuple[int, int]] = Field(default_factory=list,
                                                description="GPU index pairs bridged by NVLink")
    form_factor: Literal["pcie", "sxm", "nvl"] = Field(
        "pcie", description="pcie, sxm (an HGX board) or nvl: picks the vGPU board code the "
        "plan names (A100D or A100DX, H100 or H100XM); discovery reads it from the PCI "
        "device id")

    @field_validator("model")
    @classmethod
    def _known_model(cls, value: str) -> str:
        return mig.canonical_gpu_key(value)

    @model_validator(mode="after")
    def _consistent(self) -> GpuInventory:
        if self.pci_ids and len(self.pci_ids) != self.count:
            raise ValueError(f"pci_ids lists {len(self.pci_ids)} addresses for count "
                             f"{self.count}; list one per GPU or none")
        for a, b in self.nvlink_pairs:
            if not (0 <= a < self.count and 0 <= b < self.count) or a == b:
                raise ValueError(f"nvlink pair ({a}, {b}) must name two GPU indexes "
                                 f"in 0..{self.count - 1}")
        return self

    @property
    def gpu(self) -> mig.GpuModel:
        return mig.gpu_model(self.model)


PCI_ADDRESS = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
RdmaNicKind = Literal["passthrough", "sriov", "pvrdma"]


class RdmaNic(StrictModel):
    """An RDMA-capable NIC of one host that VMs get when the scenario's network.rdma is
    roce or ib: the whole NIC (DirectPath I/O), an SR-IOV virtual function of it, or a
    PVRDMA adapter backed by it."""

    pci_id: str = Field(description="the NIC's PCI address as the host lists it, e.g. "
                        "0000:3b:00.0 (for sriov: the physical function)")
    kind: RdmaNicKind = Field(description="passthrough (one VM owns the NIC), sriov (each VM "
                              "gets a virtual function) or pvrdma (each VM gets a PVRDMA "
                              "adapter)")
    model: str | None = Field(None, description="what the NIC is, e.g. ConnectX-6 (shown "
                              "in plans and reports)")
    network: str | None = Field(None, description="port group the SR-IOV or PVRDMA adapter "
                                "joins (default: placement.network)")
    mlx_device: str | None = Field(None, description="the NIC as mlxconfig names it on the "
                                   "host (`mst status`), e.g. mt4123_pciconf0: fills {device} "
                                   "in an ATS nic_firmware command")
    ats_firmware: Literal["enabled"] | None = Field(
        None, description="record `enabled` once the scenario's ATS nic_firmware step is done "
        "on this NIC and the host rebooted (vgpu cannot read NIC firmware through vSphere)")

    @field_validator("pci_id")
    @classmethod
    def _pci_address(cls, value: str) -> str:
        if not PCI_ADDRESS.match(value.lower()):
            raise PydanticCustomError("vgpu_pci_id", "{message}", {
                "message": f"'{value}' is not a PCI address",
                "fix": "write it as the host lists it: domain:bus:device.function, "
                       "e.g. 0000:3b:00.0"})
        return value.lower()


class EsxiHost(StrictModel):
    name: Name = Field(description="host name as vCenter shows it")
    gpus: list[GpuInventory] = Field(default_factory=list)
    max_vms: int | None = Field(None, ge=1)
    rdma_nics: list[RdmaNic] = Field(default_factory=list, description="RDMA NICs the "
                                     "scenario's VMs get when its network.rdma is roce or ib")

    @model_validator(mode="after")
    def _distinct_devices(self) -> EsxiHost:
        nics = [n.pci_id for n in self.rdma_nics]
        gpus = {pci.lower() for g in self.gpus for pci in g.pci_ids}
        clash = sorted({n for n in nics if nics.count(n) > 1 or n in gpus})
        if clash:
            raise PydanticCustomError("vgpu_rdma_nic", "{message}", {
                "message": f"rdma_nics list {', '.join(clash)} twice or also as a GPU",
                "fix": "give each NIC once, at its own PCI address"})
        return self


class IpPool(StrictModel):
    start: str
    end: str
    netmask: str = "255.255.255.0"
    gateway: str | None = None
    dns: list[str] = Field(default_factory=list)
    domain: str = "lab.local"

    @field_validator("start", "end", "gateway")
    @classmethod
    def _ip(cls, value: str | None) -> str | None:
        if value is not None:
            ipaddress.IPv4Address(value)
        return value

    @model_validator(mode="after")
    def _ordered(self) -> IpPool:
        if ipaddress.IPv4Address(self.start) > ipaddress.IPv4Address(self.end):
            raise ValueError(f"pool start {self.start} is after its end {self.end}")
        return self

    def addresses(self) -> list[str]:
        first, last = ipaddress.IPv4Address(self.start), ipaddress.IPv4Address(self.end)
        return [str(ipaddress.IPv4Address(i)) for i in range(int(first), int(last) + 1)]


class Network(StrictModel):
    ip_pool: IpPool | None = None
    static: dict[str, str] = Field(default_factory=dict,
                                   description="VM name -> fixed IP, before the pool")

    @field_validator("static")
    @classmethod
    def _ips(cls, value: dict[str, str]) -> dict[str, str]:
        for ip in value.values():
            ipaddress.IPv4Address(ip)
        return value


class JumpHost(StrictModel):
    host: str
    port: int = 22
    user: str | None = None


class SshDefaults(StrictModel):
    user: str = "vgpu"
    port: int = Field(22, ge=1, le=65535)
    key_file: str | None = Field(None, description="private key; the SSH agent is used if unset")
    known_hosts: str = Field("~/.ssh/known_hosts",
                             description="host keys are checked against this file")
    jump_host: JumpHost | None = None
    sudo_password: Secret | None = None
    connect_timeout_s: float = Field(15, gt=0)
    command_timeout_s: float = Field(3600, gt=0)


class BareMetalHost(StrictModel):
    name: Name
    address: str = Field(description="IP or host name; 'local' for this machine")
    gpus: list[GpuInventory] = Field(default_factory=list)
    ssh: SshDefaults | None = Field(None, description="overrides the inventory's ssh defaults")

    @property
    def is_local(self) -> bool:
        return self.address in {"local", "localhost"}


class Drivers(StrictModel):
    """Where guest software comes from. Files are uploaded; URLs are fetched on the guest."""

    guest_driver: str | None = Field(None, description="NVIDIA vGPU guest driver .run file or URL")
    datacenter_driver: str | None = Field(
        None, description="NVIDIA data-center driver .run file or URL "
        "(NVIDIA-Linux-x86_64-<version>.run), installed where the scenario says "
        "guest.driver: datacenter (passthrough VMs, bare-metal hosts; no vGPU licensing)")
    guest_driver_version: str | None = Field(
        None, description="guest driver version, e.g. 535.161.08; unset: read from the "
        "guest_driver file name (NVIDIA-Linux-x86_64-535.161.08-grid.run)")
    host_driver_version: str | None = Field(
        None, description="expected host driver (VIB) version, e.g. 535.161.05; preflight "
        "says when a host's VIB differs; a guest's running driver is judged against it only "
        "where vCenter cannot report the VIB of the host the guest runs on")
    licence_token: str | None = Field(None, description="client configuration token file "
                                                         "(.tok) for nvidia-gridd")
    compatible_guest_branches: list[int] = Field(
        default_factory=list, description="guest driver branches this lab runs under its "
        "host driver besides those NVIDIA's release notes list (the same branch, the "
        "previous one, the previous long-term one), e.g. [525] for a combination NVIDIA "
        "support confirmed for you; a guest newer than the host is refused regardless")


    def guest_version(self) -> str | None:
        """The guest driver version: guest_driver_version, else the version in the
        guest_driver file name, else None."""
        if self.guest_driver_version:
            return self.guest_driver_version
        match = _DRIVER_FILE_VERSION.search(self.guest_driver or "")
        return match.group(1) if match else None


_DRIVER_FILE_VERSION = re.compile(r"(?:^|[-_/])(\d{3,4}\.\d+(?:\.\d+)?)(?:[-_.]|$)")

DOCKER_HOST_SCHEMES = ("unix://", "tcp://", "ssh://", "fd://")


class DockerSettings(StrictModel):
    """How vgpu calls docker on the guests and bare-metal hosts."""

    host: str | None = Field(None, description="daemon address passed as `docker -H`, e.g. "
                             "unix:///run/docker.sock; unset: docker's own default")
    binary: str = Field("docker", description="the docker CLI (name on PATH or full path)")
    unlimited_memlock: bool = Field(
        True, description="give harness containers `--ulimit memlock=-1` (pinned host memory "
        "for GPU copies, as NVIDIA's containers expect); false only where the daemon may not "
        "raise the limit")

    @field_validator("host")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(DOCKER_HOST_SCHEMES):
            raise PydanticCustomError("vgpu_docker_host", "{message}", {
                "message": f"'{value}' is not a docker daemon address",
                "fix": f"start it with one of {', '.join(DOCKER_HOST_SCHEMES)}, e.g. "
                       "unix:///run/docker.sock"})
        return value


class Inventory(FileModel):
    name: str
    description: str = ""
    lab: Name | None = Field(
        None, description="the lab's identity in vCenter: every VM vgpu creates carries it, "
        "and vgpu changes or deletes only VMs of its own lab; default: the inventory's name "
        "(characters outside A-Z a-z 0-9 . _ - become '-')")
    vcenter: VCenter | None = None
    placement: VmPlacement | None = None
    hosts: list[EsxiHost] = Field(default_factory=list)
    network: Network = Field(default_factory=Network)
    ssh: SshDefaults = Field(default_factory=SshDefaults)
    bare_metal: list[BareMetalHost] = Field(default_factory=list)
    drivers: Drivers = Field(default_factory=Drivers)
    docker: DockerSettings = Field(default_factory=DockerSettings,
                                   description="how docker is called on the guests")

    @model_validator(mode="after")
    def _consistent(self) -> Inventory:
        if self.vcenter and not self.placement:
            raise ValueError("a vcenter needs 'placement' (datacenter, datastore, network, "
                             "template)")
        if self.hosts and not self.vcenter:
            raise ValueError("ESXi 'hosts' need a 'vcenter' to reach them")
        names = [h.name for h in self.hosts] + [b.name for b in self.bare_metal]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"host names must be unique; repeated: {', '.join(dupes)}")
        return self

    @property
    def is_local(self) -> bool:
        return not self.vcenter and all(b.is_local for b in self.bare_metal)

    @property
    def lab_name(self) -> str:
        """``lab``, else the inventory's name made a valid name (stable: it changes only
        when the name does)."""
        if self.lab:
            return self.lab
        derived = re.sub(r"[^A-Za-z0-9._-]+", "-", self.name).strip("-.").replace("..", ".")
        return derived[:MAX_NAME_LENGTH] or "lab"

    def docker_cli(self) -> DockerCli:
        """The docker CLI every guest command goes through (``-H`` where docker.host is set)."""
        return DockerCli(binary=self.docker.binary, host=self.docker.host)

"""Start and stop the simulator lab (the binary from vgpu.sim.build) as a child process.

The lab's inventory names are fixed by govmomi's VPX model: datacenter DC0, cluster DC0_C0,
hosts DC0_C0_H0.., datastore LocalDS_0, network "VM Network".
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from vgpu.errors import RemoteError
from vgpu.sim.build import build

DATACENTER = "DC0"
CLUSTER = "DC0_C0"
DATASTORE = "LocalDS_0"
NETWORK = "VM Network"
TEMPLATE = "vgpu-template"
USERNAME = "user"
ESXI_VERSION = "8.0.2"
ESXI_BUILD = "22380479"
VIB_NAME = "NVD-AIE_ESXi_8.0.0_Driver"  # the NVIDIA AI Enterprise host driver, as main.go names it
VIB_VERSION = "535.161.05-1OEM.800.1.0.20613240"
GPU_PCI_DEVICE_ID = 0x20B5  # A100 PCIe 80GB
GPU_MODEL = "A100-80GB"
GPU_FORM_FACTORS = {"pcie": 0x20B5, "sxm": 0x20B2}  # main.go -gpu-form: PCI device id
PORT_GROUP = "vgpu-lab"  # a second standard port group (main.go labPortGroup)
DV_PORT_GROUP = "vgpu-dvpg"  # a distributed port group on the DVS vgpu-dvs
RDMA_NIC_MODEL = "ConnectX-6"  # Mellanox 0x15b3:0x101b, two ports per host in main.go
RDMA_NIC_PORTS = {"passthrough": "0000:3b:00.0", "sriov": "0000:3b:00.1"}  # port 1: SR-IOV
DEFAULT_PORT = 8989
LAB_STATE = "lab-state"  # main.go -state-dir: vm-host/<vm>, host-slowdown/<host>
START_TIMEOUT_S = 60.0


def host_name(index: int) -> str:
    return f"{CLUSTER}_H{index}"


def gpu_pci_ids(count: int) -> list[str]:
    """The PCI addresses main.go gives a host's GPUs, in index order."""
    return [f"0000:{0x17 + 0x20 * i:02x}:00.0" for i in range(count)]


@dataclass(frozen=True)
class LabShape:
    """What the lab looks like. Hosts with no vGPU types or no GPUs are taken from the end."""

    hosts: int = 2
    gpus_per_host: int = 4
    no_vgpu_hosts: int = 0
    no_gpu_hosts: int = 0
    tls: bool = True
    listen: str = "127.0.0.1:0"
    username: str = USERNAME
    esxi_version: str = ESXI_VERSION
    esxi_build: str = ESXI_BUILD
    template: str = TEMPLATE
    method_delays_ms: dict[str, int] = field(default_factory=dict)
    vgpu_power_on_ms: int = 0  # how long a vGPU VM's power-on takes once its GPU is chosen
    disconnected: tuple[int, ...] = ()  # host indexes reported as disconnected
    vib_version: str = VIB_VERSION
    removed_vgpu_types: tuple[str, ...] = ()  # vGPU types no host offers
    maintenance: tuple[int, ...] = ()  # host indexes in maintenance mode
    sriov_off: tuple[int, ...] = ()  # host indexes whose NIC port 1 has SR-IOV off
    passthrough_hosts: tuple[int, ...] = ()  # host indexes whose GPUs are in passthrough
    drs_initial_placement: bool = False  # DRS moves VMs at power-on unless set to manual
    host_options: dict[str, str] = field(default_factory=dict)  # advanced options every
    # host knows, with their start values (integers are kept as integers)
    gpu_form_factor: str = "pcie"  # sxm: HGX A100 80GB (device 0x20b2, board A100DX)
    template_firmware: str = "efi"  # bios: a template vGPU VMs cannot boot from
    host_memory_gb: int = 1024  # every host's memory (hardware.memorySize)
    host_cpu_cores: int = 64  # every host's cores; twice as many logical CPUs
    # what a real vSphere 8 cluster runs beside the workloads: vCLS VMs (folder vCLS) and
    # an agent VM per host, all managed by the ESX Agent Manager
    system_vms: bool = False
    xorg_off: bool = False  # compute GPUs: Xorg not running and not starting on any host
    # how the guests' harness runs are paced: "cpu" (as fast as this machine's CPU runs the
    # model: a functional check) or "gpu" (a SIMULATED GPU of a fixed rate and a GPU's
    # run-to-run noise, loadgen.backends.simulated_device: verdicts that can decide)
    device_model: str = "cpu"

    def host_names(self) -> list[str]:
        return [host_name(i) for i in range(self.hosts)]

    def gpu_host_names(self) -> list[str]:
        """Hosts with GPUs and vGPU types."""
        return self.host_names()[: self.hosts - self.no_vgpu_hosts - self.no_gpu_hosts]

    def describe(self) -> dict[str, object]:
        """What shapes the hosts, as `vgpu sim up` records it."""
        return {"hosts": self.hosts, "gpus_per_host": self.gpus_per_host,
                "esxi_version": self.esxi_version, "esxi_build": self.esxi_build,
                "vib": f"{VIB_NAME} {self.vib_version}",
                "removed_vgpu_types": list(self.removed_vgpu_types),
                "maintenance": [host_name(i) for i in self.maintenance],
                "system_vms": self.system_vms, "xorg_off": self.xorg_off,
                "device_model": self.device_model,
                "disconnected": [host_name(i) for i in self.disconnected]}

    def args(self, ca_out: Path | None) -> list[str]:
        args = [
            f"-listen={self.listen}", f"-hosts={self.hosts}", f"-gpus={self.gpus_per_host}",
            f"-no-vgpu-hosts={self.no_vgpu_hosts}", f"-no-gpu-hosts={self.no_gpu_hosts}",
            f"-tls={'true' if self.tls else 'false'}", f"-username={self.username}",
            f"-esxi-version={self.esxi_version}", f"-esxi-build={self.esxi_build}",
            f"-template={self.template}", f"-vib-version={self.vib_version}",
        ]
        if (self.host_memory_gb, self.host_cpu_cores) != (1024, 64):
            args += [f"-host-memory-gb={self.host_memory_gb}",
                     f"-host-cpu-cores={self.host_cpu_cores}"]
        if self.disconnected:
            args.append(f"-disconnected={','.join(str(i) for i in self.disconnected)}")
        if self.maintenance:
            args.append(f"-maintenance={','.join(str(i) for i in self.maintenance)}")
        if self.drs_initial_placement:
            args.append("-drs-initial-placement=true")
        if self.passthrough_hosts:
            args.append(f"-passthrough-hosts={','.join(str(i) for i in self.passthrough_hosts)}")
        if self.sriov_off:
            args.append(f"-sriov-off={','.join(str(i) for i in self.sriov_off)}")
        if self.host_options:
            options = ",".join(f"{k}={v}" for k, v in sorted(self.host_options.items()))
            args.append(f"-host-option={options}")
        if self.removed_vgpu_types:
            args.append(f"-remove-vgpu-types={','.join(self.removed_vgpu_types)}")
        if self.system_vms:
            args.append("-system-vms=true")
        if self.xorg_off:
            args.append("-xorg-off=true")
        if self.vgpu_power_on_ms:
            args.append(f"-vgpu-power-on-delay={self.vgpu_power_on_ms}ms")
        if self.gpu_form_factor != "pcie":
            args.append(f"-gpu-form={self.gpu_form_factor}")
        if self.template_firmware != "efi":
            args.append(f"-template-firmware={self.template_firmware}")
        if self.method_delays_ms:
            delays = ",".join(f"{k}={v}" for k, v in sorted(self.method_delays_ms.items()))
            args.append(f"-method-delay={delays}")
        if ca_out is not None and self.tls:
            args.append(f"-ca-out={ca_out}")
        return args


@dataclass
class RunningLab:
    """A started lab: where it listens, how to log in, and how to stop it."""

    url: str
    shape: LabShape
    password: str
    pid: int
    workdir: Path
    ca_file: Path | None
    process: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or "127.0.0.1"

    @property
    def port(self) -> int:
        parts = urlsplit(self.url)
        return parts.port or (443 if parts.scheme == "https" else 80)

    @property
    def protocol(self) -> str:
        return urlsplit(self.url).scheme

    @property
    def log_file(self) -> Path:
        return self.workdir / "vcsim.log"

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM, then SIGKILL if it has not gone within ``timeout_s``; its lab-state
        folder removed."""
        if self.process is not None:
            if self.process.poll() is None:
                self.process.terminate()
                try:
                    self.process.wait(timeout=timeout_s)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
        else:
            stop_pid(self.pid, timeout_s)
        remove_lab_state(self.workdir)


def make_lab_state(workdir: Path) -> Path:
    """The folder the simulator writes and the guests read at run time (main.go
    -state-dir), made anew: a folder of its own under the system's temporary folder that
    the guests' login user can read (the lab's workdir may sit in a private folder), linked
    from ``workdir/lab-state``; a lab restarted in the same workdir keeps its folder (the
    guests know it by its path)."""
    link = workdir / LAB_STATE
    if link.is_symlink() and link.resolve().is_dir():
        return link.resolve()
    remove_lab_state(workdir)
    folder = Path(tempfile.mkdtemp(prefix="vgpu-lab-state-"))
    folder.chmod(0o755)
    (workdir / LAB_STATE).symlink_to(folder, target_is_directory=True)
    return folder


def remove_lab_state(workdir: Path) -> None:
    """The lab-state folder of ``workdir`` and its link, gone."""
    link = workdir / LAB_STATE
    if link.is_symlink():
        shutil.rmtree(link.resolve(), ignore_errors=True)
        link.unlink()
    elif link.is_dir():
        shutil.rmtree(link, ignore_errors=True)


def stop_pid(pid: int, timeout_s: float = 10.0) -> bool:
    """Stop a lab started by another process. Returns False when it was not running."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    return True


def pid_alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def start_lab(
    shape: LabShape, workdir: Path, *, password: str | None = None, detach: bool = False,
) -> RunningLab:
    """Start the lab and wait until it prints its URL. ``detach`` keeps it running after this
    process exits (for ``vgpu sim up``); otherwise the caller must ``stop()`` it."""
    binary = build()
    workdir.mkdir(parents=True, exist_ok=True)
    password = password or secrets.token_urlsafe(16)
    ca_file = workdir / "ca.pem" if shape.tls else None
    url_file = workdir / "url"
    url_file.unlink(missing_ok=True)
    lab_state = make_lab_state(workdir)
    (lab_state / "device-model").write_text(shape.device_model + "\n")
    log_file = workdir / "vcsim.log"
    with url_file.open("wb") as out, log_file.open("wb") as log:
        process = subprocess.Popen(
            [str(binary), *shape.args(ca_file), f"-state-dir={lab_state}"],
            stdout=out, stderr=log, stdin=subprocess.DEVNULL,
            env={**os.environ, "VGPU_SIM_PASSWORD": password},
            start_new_session=detach,
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        text = url_file.read_text(encoding="utf-8").strip() if url_file.exists() else ""
        if text:
            return RunningLab(
                url=text.splitlines()[0], shape=shape, password=password, pid=process.pid,
                workdir=workdir, ca_file=ca_file, process=None if detach else process,
            )
        if process.poll() is not None:
            raise RemoteError(
                f"the vSphere simulator exited with code {process.returncode}: "
                f"{log_file.read_text(encoding='utf-8', errors='replace').strip()}"
            )
        time.sleep(0.05)
    process.kill()
    process.wait()
    raise RemoteError(f"the vSphere simulator did not start within {START_TIMEOUT_S:.0f} s "
                      f"(log: {log_file})")


def _description(lab: RunningLab) -> str:
    shape = lab.shape
    text = (f"vSphere simulator lab at {lab.url}: {shape.hosts} ESXi {shape.esxi_version} "
            f"(build {shape.esxi_build}) hosts, {shape.gpus_per_host} x {GPU_MODEL} each, "
            f"host driver {VIB_NAME} {shape.vib_version}")
    if shape.removed_vgpu_types:
        text += f"; vGPU types removed: {', '.join(shape.removed_vgpu_types)}"
    if shape.maintenance:
        text += "; in maintenance: " + ", ".join(host_name(i) for i in shape.maintenance)
    return text


def inventory_data(
    lab: RunningLab, *, password_file: str, hosts: list[str] | None = None,
    gpus_per_host: int | None = None, ip_pool: tuple[str, str] = ("127.0.0.11", "127.0.0.40"),
    rdma_nic_kind: str | None = None,
) -> dict[str, object]:
    """An inventory (vgpu's YAML format) for a running lab. TLS stays verified, against the
    lab's own certificate; the password is read from ``password_file``. ``rdma_nic_kind``
    (passthrough, sriov or pvrdma) lists each host's ConnectX-6 as its RDMA NIC."""
    count = lab.shape.gpus_per_host if gpus_per_host is None else gpus_per_host
    vcenter: dict[str, object] = {
        "host": lab.host, "port": lab.port, "user": lab.shape.username,
        "password": {"file": password_file}, "protocol": lab.protocol,
    }
    if lab.ca_file is not None:
        vcenter["ca_bundle"] = str(lab.ca_file)
    if lab.protocol == "http":
        vcenter["insecure_http"] = True
    return {
        "name": "vcsim-lab",
        "description": _description(lab),
        "vcenter": vcenter,
        "placement": {"datacenter": DATACENTER, "cluster": CLUSTER, "datastore": DATASTORE,
                      "network": NETWORK, "template": lab.shape.template},
        "hosts": [
            {"name": name, "gpus": [{"model": GPU_MODEL, "count": count,
                                      "pci_ids": gpu_pci_ids(count),
                                      **_form_factor(lab.shape)}] if count else [],
             **_rdma_nics(rdma_nic_kind)}
            for name in (hosts if hosts is not None else lab.shape.gpu_host_names())
        ],
        "network": {"ip_pool": {"start": ip_pool[0], "end": ip_pool[1],
                                "netmask": "255.0.0.0", "gateway": "127.0.0.1"}},
    }


def _form_factor(shape: LabShape) -> dict[str, object]:
    """The gpus entry's form_factor where the lab's GPUs are not PCIe cards."""
    return {} if shape.gpu_form_factor == "pcie" else {"form_factor": shape.gpu_form_factor}


def _rdma_nics(kind: str | None) -> dict[str, object]:
    """A host's rdma_nics entry for the lab's ConnectX-6 (port 0 for passthrough, the
    SR-IOV port 1 otherwise)."""
    if kind is None:
        return {}
    pci_id = RDMA_NIC_PORTS.get(kind, RDMA_NIC_PORTS["sriov"])
    return {"rdma_nics": [{"pci_id": pci_id, "kind": kind, "model": RDMA_NIC_MODEL}]}

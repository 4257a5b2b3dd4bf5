"""The vSphere simulator lab for tests: govmomi's vcsim shaped like the GPU lab.

``VcsimLab(LabShape(...))`` builds the simulator once per machine (cached, about 20 s the
first time), starts it on a free loopback port with TLS and a random password, and stops it
on exit. It writes everything a test needs to talk to it the way a user would:

    with VcsimLab(LabShape(hosts=2)) as lab:
        lab.target()                  # VCenterTarget (TLS verified against lab.ca_file)
        lab.placement_names()         # VmPlacementNames for DC0 / DC0_C0 / LocalDS_0 / ...
        lab.write_inventory(path)     # an inventory YAML in vgpu's format for the CLI

Tests that only need one default lab can use the ``vcsim_lab`` fixture (import it into the
test module or a conftest). Needs Go and govmomi's sources (scripts/setup.sh --test).
"""

from __future__ import annotations

import base64
import json
import shutil
import ssl
import tempfile
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

import pytest
import yaml
from pyVmomi import vim

from vgpu.sim import lab as simlab
from vgpu.sim.build import GOVMOMI_SRC
from vgpu.sim.lab import LabShape, RunningLab, start_lab
from vgpu.vsphere.connect.connection import (
    VCenterTarget,
    VmPlacementNames,
    connect,
    resolve_placement,
)
from vgpu.vsphere.connect.tasks import wait_for_task


def lab_available() -> str | None:
    """None when the simulator can be built here, else the reason."""
    if shutil.which("go") is None and not Path("/usr/lib/go/bin/go").exists():
        return "Go is not installed: run `bash scripts/setup.sh --test`"
    if not GOVMOMI_SRC.is_dir():
        return "govmomi sources are missing: run `bash scripts/setup.sh --test`"
    return None


class VcsimLab:
    """A running simulator lab; a context manager that stops it and removes its files."""

    def __init__(self, shape: LabShape | None = None, password: str | None = None) -> None:
        self.shape = shape or LabShape()
        self._password = password
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._running: RunningLab | None = None

    def __enter__(self) -> VcsimLab:
        self._tmp = tempfile.TemporaryDirectory(prefix="vgpu-vcsim-")
        self._running = start_lab(self.shape, Path(self._tmp.name), password=self._password)
        self.password_file.write_text(self.running.password + "\n", encoding="utf-8")
        self.password_file.chmod(0o600)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            if self._running is not None:
                self._running.stop()
        finally:
            if self._tmp is not None:
                self._tmp.cleanup()

    @property
    def running(self) -> RunningLab:
        assert self._running is not None, "use VcsimLab as a context manager"
        return self._running

    @property
    def workdir(self) -> Path:
        return self.running.workdir

    @property
    def password_file(self) -> Path:
        return self.workdir / "password"

    @property
    def ca_file(self) -> Path | None:
        return self.running.ca_file

    @property
    def url(self) -> str:
        return self.running.url

    def host_names(self) -> list[str]:
        return self.shape.host_names()

    def target(self, **overrides: object) -> VCenterTarget:
        values: dict[str, object] = {
            "host": self.running.host, "port": self.running.port,
            "protocol": self.running.protocol, "user": self.shape.username,
            "password": self.running.password,
            "ca_bundle": str(self.ca_file) if self.ca_file else None, "source": "vcsim lab",
            "insecure_http": self.running.protocol == "http",
        }
        values.update(overrides)
        return VCenterTarget(**values)  # type: ignore[arg-type]

    def placement_names(self, **overrides: str | None) -> VmPlacementNames:
        values: dict[str, str | None] = {
            "datacenter": simlab.DATACENTER, "cluster": simlab.CLUSTER,
            "datastore": simlab.DATASTORE, "network": simlab.NETWORK,
            "template": self.shape.template, "source": "vcsim lab",
        }
        values.update(overrides)
        return VmPlacementNames(**values)  # type: ignore[arg-type]

    def inventory_data(
        self, *, hosts: list[str] | None = None, gpus_per_host: int | None = None,
        ip_pool: tuple[str, str] = ("127.0.0.11", "127.0.0.40"),
        extra: dict[str, object] | None = None, rdma_nic_kind: str | None = None,
    ) -> dict[str, object]:
        """An inventory (vgpu's YAML format) describing this lab. ``extra`` adds or replaces
        top-level sections, e.g. ``{"ssh": {...}}`` pointing at an SshLab, whose addresses
        (127.0.0.11, ...) are the pool's first addresses."""
        data = simlab.inventory_data(
            self.running, password_file=str(self.password_file), hosts=hosts,
            gpus_per_host=gpus_per_host, ip_pool=ip_pool, rdma_nic_kind=rdma_nic_kind)
        data.update(extra or {})
        return data

    def make_foreign_vm(self, name: str, host: str, vgpus: tuple[str, ...] = (),
                        power_on: bool = True) -> None:
        """A VM vgpu did not create (no owner marks), holding ``vgpus`` on ``host``: made
        with plain pyvmomi calls, the way another team's tooling would."""
        with connect(self.target()) as session:
            placement = resolve_placement(session, self.placement_names())
            host_ref = placement.hosts[host]
            spec = vim.vm.CloneSpec(location=vim.vm.RelocateSpec(
                pool=placement.resource_pool, datastore=placement.datastore, host=host_ref),
                powerOn=False)
            vm = wait_for_task(placement.template.CloneVM_Task(
                folder=placement.folder, name=name, spec=spec), f"clone {name}")
            if vm.runtime.host._moId != host_ref._moId:
                wait_for_task(vm.RelocateVM_Task(spec=vim.vm.RelocateSpec(host=host_ref)),
                              f"relocate {name}")
            changes = [vim.vm.device.VirtualDeviceSpec(
                operation=vim.vm.device.VirtualDeviceSpec.Operation.add,
                device=vim.vm.device.VirtualPCIPassthrough(
                    key=-1 - i,
                    backing=vim.vm.device.VirtualPCIPassthrough.VmiopBackingInfo(vgpu=t)))
                for i, t in enumerate(vgpus)]
            wait_for_task(vm.ReconfigVM_Task(spec=vim.vm.ConfigSpec(
                deviceChange=changes, memoryReservationLockedToMax=True)), f"reconfigure {name}")
            if power_on:
                wait_for_task(vm.PowerOnVM_Task(), f"power on {name}")

    def set_tools_running(self, vm_name: str) -> None:
        """Report VMware Tools as running in ``vm_name``'s guest: the simulator's own
        extraConfig back door (``SET.<property>``); its guests run no Tools otherwise."""
        with connect(self.target()) as session:
            placement = resolve_placement(session, self.placement_names())
            vm = session.by_name(placement.datacenter.vmFolder, vim.VirtualMachine)[vm_name]
            wait_for_task(vm.ReconfigVM_Task(spec=vim.vm.ConfigSpec(extraConfig=[
                vim.option.OptionValue(key="SET.guest.toolsRunningStatus",
                                       value="guestToolsRunning")])), f"tools of {vm_name}")

    def set_maintenance(self, host: str, on: bool) -> None:
        with connect(self.target()) as session:
            ref = resolve_placement(session, self.placement_names()).hosts[host]
            task = ref.EnterMaintenanceMode_Task(timeout=0) if on \
                else ref.ExitMaintenanceMode_Task(timeout=0)
            wait_for_task(task, f"maintenance mode {'on' if on else 'off'} for {host}")

    def xorg(self, host: str) -> dict[str, object]:
        """What the simulator recorded of ``host``'s Xorg (no vSphere API says it): running,
        restarts (each restart or start), active_policy (the assignment policy in effect)."""
        query = urllib.parse.urlencode({"host": host})
        login = base64.b64encode(
            f"{self.shape.username}:{self.running.password}".encode()).decode()
        parts = urllib.parse.urlsplit(self.url)
        endpoint = urllib.parse.urlunsplit((parts.scheme, parts.netloc, "/vgpu-lab/xorg",
                                            query, ""))
        request = urllib.request.Request(endpoint, headers={"Authorization": f"Basic {login}"})
        context = ssl.create_default_context(cafile=str(self.ca_file)) if self.ca_file else None
        with urllib.request.urlopen(request, timeout=10, context=context) as answer:
            return dict(json.loads(answer.read()))

    def set_xorg_running(self, host: str, on: bool) -> None:
        """Start or stop ``host``'s Xorg through its HostServiceSystem."""
        with connect(self.target()) as session:
            ref = resolve_placement(session, self.placement_names()).hosts[host]
            services = ref.configManager.serviceSystem
            services.StartService(id="xorg") if on else services.StopService(id="xorg")

    def recent_tasks(self) -> list[str]:
        """Ids of the tasks vCenter's TaskManager lists as recent (new tasks append)."""
        with connect(self.target()) as session:
            return [t._moId for t in session.content.taskManager.recentTask]

    def write_inventory(self, path: Path, **kwargs: object) -> Path:
        path.write_text(yaml.safe_dump(self.inventory_data(**kwargs),  # type: ignore[arg-type]
                                       sort_keys=False), encoding="utf-8")
        return path


@pytest.fixture
def vcsim_lab() -> Iterator[VcsimLab]:
    """A fresh default lab (2 hosts x 4 A100 80GB) for one test."""
    reason = lab_available()
    if reason:
        pytest.skip(reason)
    with VcsimLab() as lab:
        yield lab

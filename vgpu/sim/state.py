"""The background lab of ``vgpu sim up`` / ``vgpu sim down``: one per user, its pid, URL
and files in a state directory ($VGPU_SIM_STATE_DIR, by default ~/.cache/vgpu/sim). As root
it also prepares the guests' network and login (vgpu.sim.guests); the guests themselves
follow the VMs `vgpu apply` creates in the lab (vgpu.sim.follow)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from vgpu.errors import InputError, RemoteError
from vgpu.runpaths import cache_dir
from vgpu.sim import dockerd, guests
from vgpu.sim.hostupgrade import HostUpgrade, upgrade_host
from vgpu.sim.lab import (
    LabShape,
    RunningLab,
    inventory_data,
    pid_alive,
    remove_lab_state,
    start_lab,
    stop_pid,
)

STATE_FILE = "state.json"
PASSWORD_FILE = "password"


@dataclass(frozen=True)
class LabRecord:
    pid: int
    url: str
    inventory: str
    workdir: str
    shape: dict[str, object] = field(default_factory=dict)  # LabShape.describe()
    guest_prefix: str = ""  # the guests' /24 ("10.a.b"); empty: no guests (see guests_missing)
    guests_missing: str = ""  # what this machine lacks for guests, when it does
    lab_shape: dict[str, object] = field(default_factory=dict)  # the LabShape, to restart it
    docker_missing: str = ""  # what this machine lacks for the guests' real Docker daemon

    @property
    def guest_network(self) -> guests.GuestNetwork | None:
        if not self.guest_prefix:
            return None
        return guests.GuestNetwork(prefix=self.guest_prefix, workdir=self.workdir)


def state_dir() -> Path:
    return Path(os.environ.get("VGPU_SIM_STATE_DIR") or cache_dir() / "sim")


def _read() -> LabRecord | None:
    path = state_dir() / STATE_FILE
    if not path.exists():
        return None
    return LabRecord(**json.loads(path.read_text(encoding="utf-8")))


def status() -> LabRecord | None:
    """The running lab, or None (a record whose process has gone is cleared)."""
    record = _read()
    if record is None:
        return None
    if not pid_alive(record.pid):
        network = record.guest_network
        if network is not None:
            guests.teardown(network)  # guests without their vCenter follow it
        (state_dir() / STATE_FILE).unlink(missing_ok=True)
        return None
    return record


def up(shape: LabShape, inventory_out: Path,
       say: Callable[[str], None] | None = None) -> tuple[RunningLab, LabRecord]:
    """Start a detached lab, record it, write its password file and inventory. With root,
    also the guests' network, login and simulated driver files, and the Docker daemon their
    docker forwards to (else the record says what is missing for guests or Docker)."""
    running = status()
    if running is not None:
        raise InputError.single("command line", "vgpu sim up",
                                f"a simulator lab is already running at {running.url} "
                                f"(pid {running.pid})", fix="run `vgpu sim down` first")
    workdir = state_dir() / "lab"
    shutil.rmtree(workdir, ignore_errors=True)
    lab = start_lab(shape, workdir, detach=True)
    password_file = workdir / PASSWORD_FILE
    password_file.write_text(lab.password + "\n", encoding="utf-8")
    password_file.chmod(0o600)
    missing = guests.missing_for_guests()
    prefix, docker_missing = "", ""
    if missing is None:
        try:
            net = guests.prepare(workdir, lab.pid)
            docker_missing = _start_daemon(net, say) or ""
        except RuntimeError as exc:
            stop_pid(lab.pid)
            raise RemoteError(f"the simulator lab's guests could not be prepared: {exc}") \
                from None
        except BaseException:
            stop_pid(lab.pid)
            raise
        prefix = net.prefix
    record = LabRecord(pid=lab.pid, url=lab.url, inventory=str(inventory_out.resolve()),
                       workdir=str(workdir), shape=shape.describe(), guest_prefix=prefix,
                       guests_missing=missing or "", lab_shape=asdict(shape),
                       docker_missing=docker_missing)
    _save(record, lab)
    return lab, record


def _start_daemon(net: guests.GuestNetwork, say: Callable[[str], None] | None) -> str | None:
    """The guests' real Docker daemon with the base image in it; what is missing for it,
    or None. A daemon that fails to start removes the guests' network again (the caller
    stops the lab)."""
    missing = dockerd.missing()
    if missing is not None:
        return missing
    try:
        daemon, _ = dockerd.start(group="docker")
    except RuntimeError:
        guests.teardown(net)
        raise
    net.daemon_file.write_text(json.dumps(daemon.as_dict()), encoding="utf-8")
    try:
        dockerd.ensure_base_image(daemon.cli, Path(net.workdir), say=say)
    except BaseException:
        guests.teardown(net)
        raise
    return None


def _save(record: LabRecord, lab: RunningLab) -> None:
    """The state record and the inventory (with the guests' sections when there are any)."""
    password_file = Path(record.workdir) / PASSWORD_FILE
    data = inventory_data(lab, password_file=str(password_file))
    if record.guest_network is not None:
        data.update(record.guest_network.inventory_sections())
    (state_dir() / STATE_FILE).write_text(json.dumps(asdict(record)), encoding="utf-8")
    Path(record.inventory).write_text(
        "# Written by `vgpu sim up` for the simulator lab; removed by `vgpu sim down`.\n"
        + yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def upgrade(esxi_build: str, vib_version: str) -> tuple[RunningLab, LabRecord]:
    """What an ESXi and host-driver upgrade does to the lab: its vCenter restarts with
    every host on ``esxi_build`` and the NVIDIA VIB ``vib_version``, at the same URL and
    password. The simulator keeps no VMs across the restart, so the next `vgpu apply` (or
    `vgpu revalidate`) creates them again; the guests and what was provisioned on them
    stay, as a VM's disk does through a host upgrade."""
    record = status()
    if record is None:
        raise InputError.single("command line", "vgpu sim upgrade", "no simulator lab is "
                                "running", fix="start one with `vgpu sim up`")
    old = record.lab_shape
    shape = replace(LabShape(**{k: tuple(v) if isinstance(v, list) else v
                                for k, v in old.items()}),
                    esxi_build=esxi_build, vib_version=vib_version,
                    listen=f"127.0.0.1:{urlsplit(record.url).port}")
    workdir = Path(record.workdir)
    password = (workdir / PASSWORD_FILE).read_text(encoding="utf-8").strip()
    stop_pid(record.pid)
    lab = start_lab(shape, workdir, password=password, detach=True)
    if record.guest_network is not None:
        guests.OWNER.write_text(f"{lab.pid}\n")
        guests.match_guest_driver(record.guest_network, vib_version)
    updated = replace(record, pid=lab.pid, url=lab.url, shape=shape.describe(),
                      lab_shape=asdict(shape))
    _save(updated, lab)
    return lab, updated


def upgrade_one_host(upgrade: HostUpgrade) -> tuple[LabRecord, str]:
    """Upgrade one host of the running lab in place (vgpu.sim.hostupgrade): its VMs stay,
    the other hosts keep their build. The record and the simulator's answer."""
    record = status()
    if record is None:
        raise InputError.single("command line", "vgpu sim upgrade", "no simulator lab is "
                                "running", fix="start one with `vgpu sim up`")
    workdir = Path(record.workdir)
    password = (workdir / PASSWORD_FILE).read_text(encoding="utf-8").strip()
    ca_file = workdir / "ca.pem"
    username = str(record.lab_shape.get("username") or "user")
    answer = upgrade_host(record.url, username, password,
                          ca_file if ca_file.exists() else None, upgrade)
    return record, answer


def down() -> str | None:
    """Stop the recorded lab and remove everything it made (guests: their processes,
    namespaces, veths, the bridge, the login user); returns its URL, or None when none was
    running."""
    record = _read()
    if record is None:
        return None
    network = record.guest_network
    if network is not None:
        guests.teardown(network)
    stop_pid(record.pid)
    remove_lab_state(Path(record.workdir))
    (state_dir() / STATE_FILE).unlink(missing_ok=True)
    Path(record.inventory).unlink(missing_ok=True)
    shutil.rmtree(record.workdir, ignore_errors=True)
    return record.url

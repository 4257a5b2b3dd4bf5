"""The background lab of ``vgpu sim up`` / ``vgpu sim down``: one per user, its pid, URL
and files in a state directory ($VGPU_SIM_STATE_DIR, by default ~/.cache/vgpu/sim)."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from vgpu.errors import InputError
from vgpu.sim.build import cache_dir
from vgpu.sim.lab import LabShape, RunningLab, inventory_data, pid_alive, start_lab, stop_pid

STATE_FILE = "state.json"
PASSWORD_FILE = "password"


@dataclass(frozen=True)
class LabRecord:
    pid: int
    url: str
    inventory: str
    workdir: str
    shape: dict[str, object] = field(default_factory=dict)  # LabShape.describe()


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
        (state_dir() / STATE_FILE).unlink(missing_ok=True)
        return None
    return record


def up(shape: LabShape, inventory_out: Path) -> RunningLab:
    """Start a detached lab, record it, write its password file and inventory."""
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
    inventory_out.write_text(
        "# Written by `vgpu sim up` for the simulator lab; removed by `vgpu sim down`.\n"
        + yaml.safe_dump(inventory_data(lab, password_file=str(password_file)),
                         sort_keys=False), encoding="utf-8")
    record = LabRecord(pid=lab.pid, url=lab.url, inventory=str(inventory_out.resolve()),
                       workdir=str(workdir), shape=shape.describe())
    (state_dir() / STATE_FILE).write_text(json.dumps(asdict(record)), encoding="utf-8")
    return lab


def down() -> str | None:
    """Stop the recorded lab; returns its URL, or None when none was running."""
    record = _read()
    if record is None:
        return None
    stop_pid(record.pid)
    (state_dir() / STATE_FILE).unlink(missing_ok=True)
    Path(record.inventory).unlink(missing_ok=True)
    shutil.rmtree(record.workdir, ignore_errors=True)
    return record.url

"""The local record of the VMs vgpu created, by ``config.instanceUuid``, one file per lab:
<state dir>/vsphere/<lab>/instances.json. A clone of a vgpu VM carries its marks but not
its instanceUuid, so marks alone never make a VM vgpu's (vgpu.vsphere.read.ownership)."""

from __future__ import annotations

import json
import os
import tempfile
import threading
from datetime import UTC, datetime
from pathlib import Path

from vgpu.runpaths import state_dir

RECORD_VERSION = 1
DEFAULT_LAB_DIR = "_default"  # the record of VMs made without a lab name (tests, old calls)


def record_path(lab: str) -> Path:
    return state_dir() / "vsphere" / (lab or DEFAULT_LAB_DIR) / "instances.json"


class InstanceRecord:
    """instanceUuid -> what vgpu created; safe to add to from the executor's threads."""

    def __init__(self, lab: str, path: Path | None = None) -> None:
        self.lab = lab
        self.path = path or record_path(lab)
        self._lock = threading.Lock()

    def _read(self) -> dict[str, dict[str, str]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            return {}  # unreadable: ownership then rests on the VM's own instance mark
        vms = data.get("vms") if isinstance(data, dict) else None
        return {k: v for k, v in vms.items() if isinstance(v, dict)} \
            if isinstance(vms, dict) else {}

    def uuids(self) -> set[str]:
        with self._lock:
            return set(self._read())

    def add(self, instance_uuid: str, vm: str, scenario: str) -> None:
        with self._lock:
            vms = self._read()
            vms[instance_uuid] = {"vm": vm, "scenario": scenario,
                                  "created": datetime.now(UTC).isoformat(timespec="seconds")}
            self._write(vms)

    def remove(self, instance_uuid: str) -> None:
        with self._lock:
            vms = self._read()
            if vms.pop(instance_uuid, None) is not None:
                self._write(vms)

    def _write(self, vms: dict[str, dict[str, str]]) -> None:
        """Atomically: a reader never sees half a file."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"version": RECORD_VERSION, "lab": self.lab, "vms": vms}, indent=2,
                          sort_keys=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".instances-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text + "\n")
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

"""One change at a time per lab: `vgpu apply` and `vgpu destroy` hold a lease on the lab
while they read, ask and change.

The lease is a folder named ``vgpu-lease-<lab>`` in the lab's VM folder. vCenter creates a
folder of one name in one parent once (a second ``CreateFolder`` fails with DuplicateName),
so two engineers starting at the same moment cannot both take it. The folder's custom
attribute ``vgpu.lease`` (CustomFieldsManager) says who holds it, for what command and until
when (vCenter's clock); the holder renews it while it works and deletes the folder at the end,
on an error and on Ctrl-C. A lease whose holder died expires; a newcomer deletes that very
folder (by its id, so of two newcomers only one succeeds) and takes a new one.
``--break-lease`` takes a lease that has not expired, with a warning."""

from __future__ import annotations

import getpass
import json
import os
import re
import socket
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any

from pyVmomi import vim, vmodl

from vgpu.errors import RemoteError
from vgpu.vsphere.connect import audit
from vgpu.vsphere.connect.connection import Session
from vgpu.vsphere.connect.tasks import describe_fault, wait_for_task

LEASE_FIELD = "vgpu.lease"
LEASE_FOLDER_PREFIX = "vgpu-lease-"
DEFAULT_LEASE_TTL_S = 120.0
# A folder seen without its holder written yet is being taken right now: look again.
UNWRITTEN_RETRIES = 5
UNWRITTEN_WAIT_S = 0.2

Warn = Callable[[str], None]


def lease_folder_name(lab: str) -> str:
    return LEASE_FOLDER_PREFIX + (lab or "default")


def this_holder() -> str:
    """Who takes the lease: user@machine (pid)."""
    return f"{getpass.getuser()}@{socket.gethostname()} (pid {os.getpid()})"


_HOLDER = re.compile(r"^(?P<user>[^@]*)@(?P<machine>.*) \(pid (?P<pid>\d+)\)$")


def holder_died_here(info: LeaseInfo) -> bool:
    """The holder was a process of this machine that is gone (a run killed with -9 whose
    lease would otherwise block its own resume until it expired)."""
    match = _HOLDER.match(info.holder)
    if match is None or match["machine"] != socket.gethostname():
        return False
    try:
        os.kill(int(match["pid"]), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


@dataclass(frozen=True)
class LeaseInfo:
    holder: str
    command: str
    expires: datetime  # vCenter's clock, UTC

    def describe(self) -> str:
        return (f"{self.holder}, running `{self.command}`, until "
                f"{self.expires.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC")

    def to_text(self) -> str:
        return json.dumps({"holder": self.holder, "command": self.command,
                           "expires": self.expires.astimezone(UTC).isoformat()})

    @classmethod
    def from_text(cls, text: str) -> LeaseInfo | None:
        try:
            data = json.loads(text)
            return cls(str(data["holder"]), str(data["command"]),
                       datetime.fromisoformat(data["expires"]))
        except (ValueError, KeyError, TypeError):
            return None


# vCenter host/lease folder -> the lease this process holds over a longer job.
_HELD_OVER_JOB: dict[str, LabLease] = {}


class LeaseHeld(RemoteError):
    """Another run holds the lab's lease."""


def _field_key(session: Session) -> int:
    """The key of the ``vgpu.lease`` custom attribute of folders, made on first use."""
    manager = session.content.customFieldsManager
    for _ in range(2):
        for field in manager.field or []:
            if field.name == LEASE_FIELD and field.managedObjectType in (vim.Folder, None):
                return int(field.key)
        try:
            return int(manager.AddCustomFieldDef(name=LEASE_FIELD, moType=vim.Folder).key)
        except vim.fault.DuplicateName:
            continue  # made by another run just now: read it
    raise RemoteError(f"vCenter {session.target.host}: the custom attribute {LEASE_FIELD} "
                      "could neither be found nor made")


class LabLease:
    """``with LabLease(...):`` holds the lab's lease for the block (see the module)."""

    def __init__(self, session: Session, lab_folder: Any, lab: str, command: str, *,
                 ttl_s: float = DEFAULT_LEASE_TTL_S, break_lease: bool = False,
                 warn: Warn | None = None, over_job: bool = False) -> None:
        self.session = session
        self.lab_folder = lab_folder
        self.lab = lab
        self.name = lease_folder_name(lab)
        self.command = command
        self.ttl_s = ttl_s
        self.break_lease = break_lease
        self.warn = warn or (lambda text: None)
        self.holder = this_holder()
        self.folder: Any = None
        self.renewals = 0
        self.lost: str | None = None  # why the lease was lost while held
        # over_job: held over a longer job in this process (a campaign over every host's
        # window); the drain, apply and undrain it runs find it and take nothing (nested)
        self.over_job = over_job
        self.nested = False
        self._key = 0
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def __enter__(self) -> LabLease:
        self.acquire()
        if self.nested:
            return self
        self._renewer = threading.Thread(target=self._renew_until_stopped,
                                         name="vgpu-lease", daemon=True)
        self._renewer.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        self.release()

    def now(self) -> datetime:
        return self.session.si.CurrentTime().astimezone(UTC)

    def _info(self) -> LeaseInfo:
        return LeaseInfo(self.holder, self.command,
                         self.now() + timedelta(seconds=self.ttl_s))

    def _existing(self) -> Any:
        return next((child for child in self.lab_folder.childEntity or []
                     if isinstance(child, vim.Folder) and child.name == self.name), None)

    def read(self, folder: Any) -> LeaseInfo | None:
        values = [v for v in folder.customValue or [] if v.key == self._key]
        return LeaseInfo.from_text(values[-1].value) if values else None

    def check_free(self) -> None:
        """Read only, before a run reads the lab: refuse at once while another run holds a
        live lease (or is taking one), so a run never plans from VMs another is making."""
        if self.break_lease:
            return
        self._key = _field_key(self.session)
        existing = self._existing()
        if existing is None:
            return
        info = self.read(existing)
        if self._outer() is not None:
            return
        if info is None or info.expires > self.now():
            raise LeaseHeld(self._busy(info))

    def _busy(self, info: LeaseInfo | None) -> str:
        if info is None:
            return (f"lab {self.lab or '(default)'} is busy: its lease folder {self.name} "
                    "names no holder (a run is taking it, or one died while taking it); "
                    "run again, or pass --break-lease if it stays")
        return (f"lab {self.lab or '(default)'} is busy: its lease is held by "
                f"{info.describe()}; nothing was changed. Wait for that run to end, or, if "
                "it died, pass --break-lease (or wait until the lease expires)")

    def _outer(self) -> LabLease | None:
        """The lease this process holds on the lab over a longer job, if any."""
        outer = _HELD_OVER_JOB.get(self._job_key)
        return outer if outer is not None and outer.folder is not None \
            and not outer.lost else None

    @property
    def _job_key(self) -> str:
        return f"{self.session.target.host}/{self.name}"

    def acquire(self) -> None:
        if self._outer() is not None:
            self.nested = True
            return
        self._key = _field_key(self.session)
        self._take()
        if self.over_job:
            _HELD_OVER_JOB[self._job_key] = self

    def _take(self) -> None:
        unwritten = 0
        while True:
            existing = self._existing()
            if existing is None:
                if self._create():
                    return
                continue  # another run made it between the look and the create
            info = self.read(existing)
            if info is None and unwritten < UNWRITTEN_RETRIES and not self.break_lease:
                unwritten += 1
                time.sleep(UNWRITTEN_WAIT_S)
                continue
            if info is not None and info.expires > self.now() and holder_died_here(info):
                self.warn(f"taking over the lease of lab {self.lab or '(default)'} from "
                          f"{info.describe()}: that process has ended on this machine")
            elif info is not None and info.expires > self.now():
                if not self.break_lease:
                    raise LeaseHeld(self._busy(info))
                self.warn(f"breaking the lease of lab {self.lab or '(default)'} held by "
                          f"{info.describe()}: if that run is still working, both change "
                          "the lab at once")
                audit.record(self.lab_folder, f"lease of lab {self.lab or '(default)'} "
                             f"broken (held by {info.describe()})", "success")
            elif info is None and not self.break_lease:
                raise LeaseHeld(self._busy(None))
            elif info is None:
                audit.record(self.lab_folder, f"lease of lab {self.lab or '(default)'} "
                             "broken (it named no holder)", "success")
            elif info is not None:
                self.warn(f"taking over the expired lease of lab {self.lab or '(default)'} "
                          f"({info.describe()})")
            self._remove(existing)
            self.break_lease = False  # broken once; a newcomer's lease is not broken again

    def _create(self) -> bool:
        try:
            folder = self.lab_folder.CreateFolder(self.name)
        except vim.fault.DuplicateName:
            return False
        self.folder = folder
        self._write()
        audit.set_lease_holder(self.holder)
        audit.record(self.lab_folder, f"lease of lab {self.lab or '(default)'} taken "
                     f"({self.name})", "success")
        return True

    def _write(self) -> None:
        self.session.content.customFieldsManager.SetField(
            entity=self.folder, key=self._key, value=self._info().to_text())

    def _remove(self, folder: Any) -> None:
        """Delete ``folder``; another run deleting it first is fine (it retakes the look)."""
        with suppress(RemoteError, vmodl.fault.ManagedObjectNotFound):
            wait_for_task(folder.Destroy_Task(), f"delete lease folder {self.name}")

    def _renew_until_stopped(self) -> None:
        while not self._stop.wait(self.ttl_s / 4):
            try:
                now_held = self.read(self.folder)
                if now_held is None or now_held.holder != self.holder:
                    self.lost = f"lease of lab {self.lab or '(default)'} taken by another run"
                    self.warn(self.lost)
                    return
                self._write()
                self.renewals += 1
            except (vmodl.MethodFault, OSError) as exc:
                self.lost = (f"the lease of lab {self.lab or '(default)'} could not be "
                             f"renewed: {describe_fault(exc)}")
                self.warn(self.lost)
                return

    def release(self) -> None:
        if self.over_job and _HELD_OVER_JOB.get(self._job_key) is self:
            del _HELD_OVER_JOB[self._job_key]
        if self.folder is None or self.lost:
            return
        try:
            wait_for_task(self.folder.Destroy_Task(), f"release the lease of lab {self.lab}")
        except (RemoteError, vmodl.MethodFault, OSError) as exc:
            self.warn(f"the lease of lab {self.lab or '(default)'} was not released ({exc}); "
                      "it expires by itself")
        else:
            audit.record(self.lab_folder, f"lease of lab {self.lab or '(default)'} released",
                         "success")
        finally:
            audit.set_lease_holder(None)
        self.folder = None

"""The audit trail: every change vgpu makes to vCenter or a host, recorded as it happens.

Each change is stored in the results store's ``audit`` table when it starts (time, vCenter
user, command line, lease holder, campaign, object moId and name, change) and completed
with its task id and result when it ends, so a command killed halfway leaves its change
listed as ``started``. It is also posted to vCenter as a user event on the object
(a GeneralUserEvent, "vgpu <command>: <change>"), so vCenter's own event view of the VM
or host says which vgpu command, lease holder and campaign made it.

The trail goes to the results store (``$VGPU_DB``, else ./vgpu-results.db; PostgreSQL
too), or to ``$VGPU_AUDIT_DB`` where set. The campaign is ``set_campaign(id)`` or
``$VGPU_CAMPAIGN``. Changes are recorded for objects of a session opened with
``vgpu.vsphere.connect.connection.connect`` (which binds it here)."""

from __future__ import annotations

import os
import shlex
import sys
import threading
import time
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from vgpu.defaults import DB_ENV, DEFAULT_DB

CAMPAIGN_ENV = "VGPU_CAMPAIGN"
AUDIT_DB_ENV = "VGPU_AUDIT_DB"
STARTED = "started"

_lock = threading.Lock()
_campaign: str | None = None
_holder: str | None = None
_sessions: dict[int, _Bound] = {}


@dataclass(frozen=True)
class _Bound:
    user: str
    vcenter: str
    events: Any  # the session's EventManager


def set_campaign(campaign: str | None) -> None:
    """The campaign id every change recorded from now on carries (None: $VGPU_CAMPAIGN)."""
    global _campaign
    _campaign = campaign


def campaign() -> str | None:
    return _campaign or os.environ.get(CAMPAIGN_ENV) or None


def set_lease_holder(holder: str | None) -> None:
    """Who holds the lab's lease while the changes are made (vgpu.vsphere.apply.lease)."""
    global _holder
    _holder = holder


def store_location() -> str:
    return os.environ.get(AUDIT_DB_ENV) or os.environ.get(DB_ENV) or str(DEFAULT_DB)


def command_line() -> str:
    args = ["vgpu", *sys.argv[1:]]
    return " ".join(shlex.quote(a) for a in args)


def command_name() -> str:
    """``vgpu <subcommand>`` as vCenter's event view shows it."""
    words = [a for a in sys.argv[1:] if not a.startswith("-")][:1]
    return " ".join(["vgpu", *words])


def bind(session: Any) -> None:
    """Record changes made through ``session`` (called by connect)."""
    user = session.target.user
    with suppress(Exception):  # a session without a readable user: the inventory's user
        user = session.content.sessionManager.currentSession.userName or user
    with _lock:
        _sessions[id(session.si._stub)] = _Bound(user, session.target.host,
                                                 session.content.eventManager)


def unbind(session: Any) -> None:
    with _lock:
        _sessions.pop(id(session.si._stub), None)


def _bound(obj: Any) -> _Bound | None:
    with _lock:
        return _sessions.get(id(getattr(obj, "_stub", None)))


def owner_of(method: Any) -> Any:
    """The managed object a pyVmomi method runs on (it holds it in its closure)."""
    from pyVmomi.VmomiSupport import ManagedObject

    owner = getattr(method, "__self__", None)
    if isinstance(owner, ManagedObject):
        return owner
    for cell in getattr(method, "__closure__", None) or ():
        if isinstance(cell.cell_contents, ManagedObject):
            return cell.cell_contents
    return None


def _name(obj: Any) -> str:
    try:
        return str(obj.name)
    except Exception:  # an object without a name, or one already gone
        return ""


def _open_store() -> Any:
    from vgpu.results.store.result_store import ResultStore

    return ResultStore.open(store_location())


@dataclass
class Change:
    """A change being made: its row id, object and words."""

    row: int
    obj: Any
    name: str
    change: str
    bound: _Bound


def begin(obj: Any, change: str, name: str | None = None) -> Change | None:
    """Store ``change`` on ``obj`` as started (None when its session is not bound)."""
    bound = _bound(obj)
    if bound is None:
        return None
    name = name if name is not None else _name(obj)
    with _open_store() as store:
        row = store.add_audit(
            at=time.time(), vcenter=bound.vcenter, user=bound.user, command=command_line(),
            holder=_holder, campaign=campaign(), object_id=str(obj._moId),
            object_name=name, object_type=type(obj).__name__.rsplit(".", 1)[-1],
            change=change, result=STARTED)
    return Change(row, obj, name, change, bound)


def task_started(change: Change | None, task: Any) -> None:
    """Keep the task id, and tell vCenter on the object."""
    if change is None:
        return
    task_id = str(getattr(task, "_moId", "")) or None
    with _open_store() as store:
        store.set_audit_task(change.row, task_id)
    post_event(change.bound, change.obj, change.name,
               f"{command_name()}: {change.change}" + (f" ({task_id})" if task_id else ""))


def end(change: Change | None, result: str) -> None:
    if change is None:
        return
    with _open_store() as store:
        store.finish_audit(change.row, result, time.time())


def record(obj: Any, change: str, result: str, name: str | None = None) -> None:
    """A change without a task (lease taken or broken): stored and posted at once."""
    entry = begin(obj, change, name)
    if entry is None:
        return
    post_event(entry.bound, obj, entry.name, f"{command_name()}: {change}")
    end(entry, result)


def post_event(bound: _Bound, obj: Any, name: str, message: str) -> None:
    """A user event on ``obj`` in vCenter, with the lease holder and campaign."""
    from pyVmomi import vim

    extra = [f"lease holder {_holder}"] if _holder else []
    if campaign():
        extra.append(f"campaign {campaign()}")
    text = message + (f" [{'; '.join(extra)}]" if extra else "")
    event = vim.event.GeneralUserEvent(
        key=0, chainId=0, createdTime=datetime.now(UTC),
        userName=bound.user, fullFormattedMessage=text, message=text,
        entity=vim.event.ManagedEntityEventArgument(entity=obj, name=name))
    if isinstance(obj, vim.VirtualMachine):
        event.vm = vim.event.VmEventArgument(vm=obj, name=name)
    elif isinstance(obj, vim.HostSystem):
        event.host = vim.event.HostEventArgument(host=obj, name=name)
    bound.events.PostEvent(eventToPost=event)

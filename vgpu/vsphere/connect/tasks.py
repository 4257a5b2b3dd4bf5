"""Wait for vCenter tasks and turn their faults into messages a person can act on."""

from __future__ import annotations

import time
from contextlib import suppress
from typing import Any

from pyVmomi import vim, vmodl

from vgpu.errors import RemoteError
from vgpu.vsphere.connect import audit
from vgpu.vsphere.connect.taskwatch import TaskWatcher

FIRST_POLL_S = 0.02
MAX_POLL_S = 1.0


def describe_fault(fault: Any) -> str:
    """``InvalidArgument (configSpec.guestId)``-style text for a vim/vmodl fault."""
    if fault is None:
        return "unknown fault"
    name = type(fault).__name__.rsplit(".", 1)[-1]
    details = [
        str(getattr(fault, attr)) for attr in ("invalidProperty", "property", "msg", "name")
        if getattr(fault, attr, None)
    ]
    messages = [m.message for m in getattr(fault, "faultMessage", None) or [] if m.message]
    text = name + (f" ({'; '.join(details)})" if details else "")
    return text + (f": {'; '.join(messages)}" if messages else "")


def _outcome(info: Any, what: str) -> Any:
    """The task's result if it succeeded; RemoteError naming ``what`` if it failed."""
    if info.state == vim.TaskInfo.State.success:
        return info.result
    error = info.error
    fault = describe_fault(error)
    detail = getattr(error, "localizedMessage", None) or ""
    if detail and detail not in fault and not detail.startswith("*types."):
        fault = f"{fault}: {detail}"
    raise RemoteError(f"{what} failed: {fault}")


def _timed_out(task: Any, what: str, timeout_s: float, state: Any) -> RemoteError:
    return RemoteError(f"{what} did not finish within {timeout_s:.0f} s "
                       f"(task {task._moId} is {state})")


def wait_for_task(task: Any, what: str, timeout_s: float = 3600.0,
                  watcher: TaskWatcher | None = None) -> Any:
    """Wait for ``task`` to end; return its result or raise RemoteError naming ``what``.

    With a ``watcher`` the task is read with every other pending task in one call per
    round; should the watcher fail (a dropped connection), this task is polled alone."""
    if watcher is not None:
        try:
            info = watcher.wait(task, timeout_s)
        except Exception:
            pass  # the watcher could not read: this task is polled below
        else:
            if info is None:
                raise _timed_out(task, what, timeout_s, "still running")
            return _outcome(info, what)
    deadline = time.monotonic() + timeout_s
    delay = FIRST_POLL_S
    while True:
        info = task.info
        if info.state in (vim.TaskInfo.State.success, vim.TaskInfo.State.error):
            return _outcome(info, what)
        if time.monotonic() > deadline:
            raise _timed_out(task, what, timeout_s, info.state)
        time.sleep(delay)
        delay = min(delay * 2, MAX_POLL_S)


class TaskCancelled(RemoteError):
    """A task outlived its timeout and was cancelled (``call(cancel_on_timeout=True)``)."""


def call(what: str, method: Any, *args: Any, watcher: TaskWatcher | None = None,
         timeout_s: float = 3600.0, cancel_on_timeout: bool = False, **kwargs: Any) -> Any:
    """Run a task-returning method and wait for it; a fault raised at call time is reported
    the same way as one raised by the task. Every call is a change: it is in the audit
    trail (vgpu.vsphere.connect.audit) as started before the task, with its result after. With
    ``cancel_on_timeout`` a task still running after ``timeout_s`` is cancelled
    (TaskCancelled), so vCenter does not go on with it behind the caller's back."""
    change = audit.begin(audit.owner_of(method), what)
    try:
        task = method(*args, **kwargs)
    except (vim.fault.VimFault, vmodl.MethodFault) as exc:
        audit.end(change, f"refused: {describe_fault(exc)}")
        raise RemoteError(f"{what} was refused: {describe_fault(exc)}") from None
    except BaseException as exc:
        audit.end(change, f"not started: {type(exc).__name__}")
        raise
    try:
        audit.task_started(change, task)
        result = wait_for_task(task, what, timeout_s=timeout_s, watcher=watcher)
    except RemoteError as exc:
        if cancel_on_timeout and _still_running(task):
            with suppress(vmodl.MethodFault):
                task.CancelTask()
            audit.end(change, f"cancelled after {timeout_s:.0f} s")
            raise TaskCancelled(f"{what} did not finish within {timeout_s:.0f} s: the task "
                                "was cancelled") from None
        audit.end(change, f"failed: {exc}")
        raise
    except BaseException as exc:
        audit.end(change, f"failed: {exc}" if isinstance(exc, RemoteError)
                  else f"interrupted: {type(exc).__name__}")
        raise
    audit.end(change, "success")
    return result


def _still_running(task: Any) -> bool:
    try:
        return task.info.state in (vim.TaskInfo.State.running, vim.TaskInfo.State.queued)
    except vmodl.MethodFault:
        return False

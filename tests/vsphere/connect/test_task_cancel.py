"""A task that outlives its timeout is cancelled when the caller asks for it, so vCenter
does not go on with it behind the caller's back (a maintenance mode that cannot finish)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from pyVmomi import vim

from vgpu.errors import RemoteError
from vgpu.vsphere.connect.tasks import TaskCancelled, call


class StuckTask:
    """A task that stays running until cancelled (as EnterMaintenanceMode does while a VM
    cannot be moved off)."""

    def __init__(self) -> None:
        self.info = SimpleNamespace(state=vim.TaskInfo.State.running)
        self._moId = "task-7"
        self.cancelled = 0

    def CancelTask(self) -> None:
        self.cancelled += 1
        self.info = SimpleNamespace(state=vim.TaskInfo.State.error)


def test_a_stuck_task_is_cancelled_after_its_timeout() -> None:
    task = StuckTask()
    with pytest.raises(TaskCancelled) as stopped:
        call("enter maintenance mode on H0", lambda _t: task, 0, timeout_s=0.05,
             cancel_on_timeout=True)
    assert task.cancelled == 1
    assert "did not finish within 0 s: the task was cancelled" in str(stopped.value)


def test_without_asking_a_stuck_task_is_left_running() -> None:
    task = StuckTask()
    with pytest.raises(RemoteError) as stopped:
        call("enter maintenance mode on H0", lambda _t: task, 0, timeout_s=0.05)
    assert not isinstance(stopped.value, TaskCancelled) and task.cancelled == 0
    assert "task-7 is running" in str(stopped.value)

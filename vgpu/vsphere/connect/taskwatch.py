"""Watch many vCenter tasks through one property collector.

Polling each task's ``info`` from its own worker costs one round trip per task per poll:
448 VMs building at once poll vCenter thousands of times a minute. Here the workers hand
their tasks to one watcher thread that reads the state of every pending task in a single
``RetrievePropertiesEx`` call per round, then wakes the workers whose tasks ended.

A batched read rather than ``WaitForUpdatesEx``: it behaves the same on vCenter and on the
simulator (whose long poll never reports a filter created on an already finished task),
and a round costs one call whatever the number of tasks.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from pyVmomi import vim, vmodl

from vgpu.vsphere.connect.collect import retrieve_all

FIRST_ROUND_S = 0.02  # a round soon after a task starts: short tasks end in milliseconds
MAX_ROUND_S = 0.5
PC = vmodl.query.PropertyCollector


@dataclass
class _Pending:
    task: Any
    done: threading.Event = field(default_factory=threading.Event)
    info: Any = None
    failure: BaseException | None = None


class TaskWatcher:
    """One thread, one property collector, any number of tasks. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._pending: dict[str, _Pending] = {}
        self._collector: Any = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self._new_work = False
        self._next_round = 0.0
        self.rounds = 0  # property-collector calls made, for benchmarks and tests

    def wait(self, task: Any, timeout_s: float) -> Any:
        """Block until ``task`` ends; return its ``TaskInfo``. ``None`` after ``timeout_s``.
        A failure of the watcher itself (connection lost) is raised to every waiter."""
        entry = _Pending(task)
        with self._lock:
            if self._closed:
                raise RuntimeError("the task watcher is closed")
            self._pending[task._moId] = entry
            # Tasks started within one short window share a round.
            self._new_work = True
            self._next_round = min(self._next_round, time.monotonic() + FIRST_ROUND_S)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="vgpu-task-watch",
                                                daemon=True)
                self._thread.start()
            self._wake.notify()
        if not entry.done.wait(timeout_s):
            with self._lock:
                self._pending.pop(task._moId, None)
            return None
        if entry.failure is not None:
            raise entry.failure
        return entry.info

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._wake.notify()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> TaskWatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _loop(self) -> None:
        delay = FIRST_ROUND_S
        while True:
            with self._lock:
                while not self._closed and (
                        not self._pending or time.monotonic() < self._next_round):
                    self._wake.wait(None if not self._pending
                                    else self._next_round - time.monotonic())
                if self._closed:
                    return
                self._new_work = False
                batch = list(self._pending.values())
            try:
                infos = self._read(batch)
            except Exception as exc:  # wake everyone: each waiter falls back on its own
                self._fail_all(exc)
                continue
            finished = 0
            with self._lock:
                for entry in batch:
                    info = infos.get(entry.task._moId)
                    if info is not None and info.state in (vim.TaskInfo.State.success,
                                                           vim.TaskInfo.State.error):
                        entry.info = info
                        self._pending.pop(entry.task._moId, None)
                        entry.done.set()
                        finished += 1
                fresh = finished or self._new_work
                delay = FIRST_ROUND_S if fresh else min(delay * 2, MAX_ROUND_S)
                self._next_round = time.monotonic() + delay

    def _read(self, batch: list[_Pending]) -> dict[str, Any]:
        """``info`` of every task in ``batch``, in one call (continued if vCenter pages)."""
        if self._collector is None:
            content = vim.ServiceInstance("ServiceInstance", batch[0].task._stub).content
            self._collector = content.propertyCollector
        spec = PC.FilterSpec(
            objectSet=[PC.ObjectSpec(obj=entry.task, skip=False) for entry in batch],
            propSet=[PC.PropertySpec(type=vim.Task, pathSet=["info"], all=False)],
        )
        self.rounds += 1
        return {task._moId: props["info"]
                for task, props in retrieve_all(self._collector, spec) if "info" in props}

    def _fail_all(self, exc: BaseException) -> None:
        with self._lock:
            for entry in self._pending.values():
                entry.failure = exc
                entry.done.set()
            self._pending.clear()

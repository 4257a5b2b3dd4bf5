"""Many tasks watched through one property collector, on the simulator."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from pyVmomi import vim

from tests.labs.vcsim import VcsimLab, lab_available
from vgpu.errors import RemoteError
from vgpu.vsphere.connect.connection import connect
from vgpu.vsphere.connect.tasks import wait_for_task
from vgpu.vsphere.connect.taskwatch import TaskWatcher
from vgpu.vsphere.plan.reconcile import read_state

pytestmark = [pytest.mark.vcsim,
              pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))]


def _clone(placement: Any, name: str, guest_id: str | None = None) -> Any:
    spec = vim.vm.CloneSpec(
        location=vim.vm.RelocateSpec(pool=placement.resource_pool,
                                     datastore=placement.datastore),
        powerOn=False, template=False,
        config=vim.vm.ConfigSpec(guestId=guest_id) if guest_id else None)
    return placement.template.CloneVM_Task(folder=placement.folder, name=name, spec=spec)


def test_sixteen_tasks_waited_at_once_each_get_their_own_result(vcsim_lab: VcsimLab) -> None:
    with connect(vcsim_lab.target()) as session:
        placement = read_state(session, vcsim_lab.placement_names()).placement
        tasks = [_clone(placement, f"watched-{i}") for i in range(16)]
        with TaskWatcher() as watcher, ThreadPoolExecutor(16) as pool:
            vms = list(pool.map(
                lambda t: wait_for_task(t, "clone", timeout_s=60, watcher=watcher), tasks))
        assert [vm.name for vm in vms] == [f"watched-{i}" for i in range(16)]
        # One read per round, never one per task and poll: every round ends at least one.
        assert 1 <= watcher.rounds <= len(tasks)
        for vm in vms:
            wait_for_task(vm.Destroy_Task(), "destroy")


def test_a_failed_task_reports_its_fault_through_the_watcher(vcsim_lab: VcsimLab) -> None:
    with connect(vcsim_lab.target()) as session:
        placement = read_state(session, vcsim_lab.placement_names()).placement
        vm = wait_for_task(_clone(placement, "watched-bad"), "clone")
        try:
            spec = vim.vm.ConfigSpec(guestId="no-such-guest-os")
            with TaskWatcher() as watcher, pytest.raises(RemoteError) as caught:
                wait_for_task(vm.ReconfigVM_Task(spec=spec), "reconfigure of VM watched-bad",
                              watcher=watcher)
            assert "reconfigure of VM watched-bad failed: InvalidArgument" in str(caught.value)
            assert "guestId" in str(caught.value)
        finally:
            wait_for_task(vm.Destroy_Task(), "destroy")


def test_a_watcher_that_cannot_read_leaves_each_task_to_be_polled(vcsim_lab: VcsimLab) -> None:
    with connect(vcsim_lab.target()) as session:
        placement = read_state(session, vcsim_lab.placement_names()).placement
        task = _clone(placement, "watched-fallback")
        with TaskWatcher() as watcher:
            watcher._collector = object()  # what a dropped connection leaves: every read fails
            vm = wait_for_task(task, "clone", timeout_s=60, watcher=watcher)
        assert vm.name == "watched-fallback"
        wait_for_task(vm.Destroy_Task(), "destroy")

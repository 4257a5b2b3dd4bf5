"""A VM that must go off (a change that needs it off, destroy) is shut down from inside the
guest through VMware Tools and powered off hard only when the guest has no Tools running or
does not finish within the timeout."""

from __future__ import annotations

import io

import pytest
from pyVmomi import vim
from rich.console import Console

from tests.labs.vcsim import VcsimLab, lab_available
from tests.vsphere.applying import apply, desired_vms
from vgpu.vsphere.apply.execute import Executor
from vgpu.vsphere.apply.power import wait_powered_off
from vgpu.vsphere.connect.connection import connect
from vgpu.vsphere.plan.diff import Step
from vgpu.vsphere.plan.reconcile import plan_teardown, read_state
from vgpu.vsphere.render import render_changes

pytestmark = [pytest.mark.vcsim,
              pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))]


def guest_shutdown_events(lab: VcsimLab) -> list[str]:
    """Names of the VMs vCenter logged a guest shutdown for."""
    with connect(lab.target()) as session:
        events = session.content.eventManager.QueryEvents(
            vim.event.EventFilterSpec(eventTypeId=["VmGuestShutdownEvent"]))
        return sorted(e.vm.name for e in events or [])


def test_destroy_shuts_a_guest_with_tools_down_and_powers_off_one_without(
    vcsim_lab: VcsimLab,
) -> None:
    apply(vcsim_lab, desired_vms(2))
    vcsim_lab.set_tools_running("s8-1g-1")
    with connect(vcsim_lab.target()) as session:
        state = read_state(session, vcsim_lab.placement_names())
        teardown = plan_teardown(state, "8")
        assert all(c.steps == [Step.POWER_OFF, Step.DESTROY] for c in teardown.changes)
        out = io.StringIO()
        render_changes(teardown, Console(file=out, width=250), "destroy",
                       shutdown_timeout_s=90)
        assert out.getvalue().count("shut down (guest, then power off after 90s), destroy") == 2
        report = Executor(state.placement, state.hosts, shutdown_timeout_s=90).run(teardown)
    assert report.failed == []
    outcomes = {o.name: o for o in report.outcomes}
    assert outcomes["s8-1g-1"].shutdown == "guest shut down"
    assert outcomes["s8-1g-1"].tasks == 1  # destroy; ShutdownGuest is no task
    assert outcomes["s8-1g-2"].shutdown == ("powered off (no VMware Tools running in the "
                                            "guest to shut it down)")
    assert outcomes["s8-1g-2"].tasks == 2  # power off, destroy
    assert guest_shutdown_events(vcsim_lab) == ["s8-1g-1"]


def test_a_change_that_needs_the_vm_off_shuts_the_guest_down_first(
    vcsim_lab: VcsimLab,
) -> None:
    apply(vcsim_lab, desired_vms(1))
    vcsim_lab.set_tools_running("s8-1g-1")
    changes, report = apply(vcsim_lab, desired_vms(1, vcpu=16))
    assert changes.pending[0].steps[0] is Step.POWER_OFF
    assert report.failed == []
    assert report.outcomes[0].shutdown == "guest shut down"
    assert guest_shutdown_events(vcsim_lab) == ["s8-1g-1"]


class Clock:
    """Time that passes only when slept through."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_the_wait_gives_up_at_the_timeout_when_the_guest_stays_on() -> None:
    clock = Clock()
    assert not wait_powered_off(lambda: "poweredOn", 10.0, clock.sleep, lambda: clock.now)
    assert clock.now == pytest.approx(10.0)
    assert max(clock.sleeps) <= 2.0  # polled at least every 2 s near the end


def test_the_wait_ends_as_soon_as_the_guest_is_off() -> None:
    clock = Clock()
    states = iter(["poweredOn", "poweredOn", "poweredOff"])
    assert wait_powered_off(lambda: next(states), 10.0, clock.sleep, lambda: clock.now)
    assert clock.now < 1.0

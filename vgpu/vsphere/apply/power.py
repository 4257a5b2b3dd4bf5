"""Power a VM off gently: ask the guest to shut down through VMware Tools, wait for it, and
power off hard only when the guest did not finish in time or has no Tools running. A hard
power-off mid-write damages the guest's filesystem, its DKMS modules and docker's state."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pyVmomi import vim, vmodl

from vgpu.vsphere.connect.tasks import describe_fault

TOOLS_RUNNING = "guestToolsRunning"  # GuestInfo.toolsRunningStatus
POWERED_OFF = "poweredOff"
FIRST_POLL_S = 0.05
MAX_POLL_S = 2.0


def shutdown_label(timeout_s: float) -> str:
    """How the plan names the step."""
    return f"shut down (guest, then power off after {timeout_s:.0f}s)"


def wait_powered_off(power_state: Callable[[], str], timeout_s: float,
                     sleep: Callable[[float], None] = time.sleep,
                     clock: Callable[[], float] = time.monotonic) -> bool:
    """True once ``power_state()`` reads poweredOff, False when ``timeout_s`` passed first."""
    deadline = clock() + timeout_s
    delay = FIRST_POLL_S
    while True:
        if str(power_state()) == POWERED_OFF:
            return True
        if clock() >= deadline:
            return False
        sleep(min(delay, max(0.0, deadline - clock())))
        delay = min(delay * 2, MAX_POLL_S)


def shut_down(vm: Any, timeout_s: float, power_off: Callable[[], object]) -> str:
    """Bring ``vm`` to poweredOff; ``power_off`` runs the hard PowerOffVM_Task (as a counted,
    watched task). Returns how it went off, for the VM's outcome."""
    if str(vm.runtime.powerState) == POWERED_OFF:
        return "already off"
    if str(vm.guest.toolsRunningStatus or "") != TOOLS_RUNNING:
        power_off()
        return "powered off (no VMware Tools running in the guest to shut it down)"
    try:
        vm.ShutdownGuest()
    except (vim.fault.VimFault, vmodl.MethodFault) as exc:
        power_off()
        return f"powered off (the guest refused to shut down: {describe_fault(exc)})"
    if wait_powered_off(lambda: vm.runtime.powerState, timeout_s):
        return "guest shut down"
    power_off()
    return f"powered off: the guest did not shut down within {timeout_s:.0f}s"

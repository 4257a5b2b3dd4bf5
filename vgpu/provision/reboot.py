"""Rebooting a guest in the middle of a step: ask for the reboot, wait until the guest
answers again with a new boot id, and go on over a fresh connection. Steps are idempotent,
so the step that asked simply continues where it was."""

from __future__ import annotations

import time

from vgpu.provision.step import HostContext, Step
from vgpu.remote.errors import ConnectionLost, UnreachableError
from vgpu.remote.local import LocalTransport
from vgpu.remote.transport import quote

BOOT_ID = "/proc/sys/kernel/random/boot_id"  # a new random id on every boot
REBOOT_COMMAND = "systemctl reboot"
POLL_S = 1.0


def boot_id(ctx: HostContext) -> str:
    return ctx.run(f"cat {quote(ctx.path(BOOT_ID))} 2>/dev/null").stdout.strip()


def reboot_and_reconnect(ctx: HostContext, step: Step, reason: str) -> None:
    """Reboot the guest because of ``reason`` and return once a new boot answers over SSH;
    fails the step when the guest does not come back within the reboot timeout."""
    if isinstance(ctx.transport, LocalTransport):
        raise step.fail(ctx, f"{reason}: this machine needs a reboot, and vgpu does not "
                        "reboot the machine it runs on", "reboot it, then run `vgpu provision` "
                        "again (the steps go on where they stopped)")
    log = ctx.transport.log
    before = boot_id(ctx)
    log.line(f"[{step.name}] rebooting: {reason}")
    try:
        asked = ctx.run(REBOOT_COMMAND, sudo=True, timeout=60)
        if not asked.ok:
            raise step.fail(ctx, f"`{REBOOT_COMMAND}` exited {asked.exit_code}: {asked.tail()}",
                            f"reboot {ctx.name} by hand, then re-run `vgpu provision`")
    except ConnectionLost:
        pass  # the guest went down before the command could report
    timeout = ctx.requirements.reboot_timeout_s
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    while time.monotonic() < deadline:
        time.sleep(POLL_S)
        try:
            ctx.transport.reconnect()
            now = boot_id(ctx)
        except (ConnectionLost, UnreachableError) as exc:
            last = exc.message
            continue
        if now and now != before:
            log.line(f"[{step.name}] back after the reboot (boot id {now})")
            return
        last = "the guest still runs the boot from before the reboot"
    raise step.fail(ctx, f"not back {timeout:.0f}s after a reboot ({reason}): {last}",
                    f"look at {ctx.name}'s console (vSphere: the VM's web console), then re-run "
                    "`vgpu provision`: the steps go on where they stopped")

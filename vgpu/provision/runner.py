"""Runs the steps on one host: check, then (unless dry-run) apply and verify; a dropped
connection is reconnected and the step re-run from its check (steps are idempotent)."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable

from vgpu.provision.report import HostReport, StepReport
from vgpu.provision.step import HostContext, Outcome, Step
from vgpu.remote.errors import ConnectionLost, ProvisionError
from vgpu.remote.transport import Transport

EventSink = Callable[[str, str, Outcome | None, str], None]
STEP_ATTEMPTS = 3  # a step is tried again after a connection loss, this many times in all


def _no_events(host: str, step: str, outcome: Outcome | None, detail: str) -> None:
    return None


def run_step(ctx: HostContext, step: Step) -> StepReport:
    started = time.monotonic()
    attempts = 0
    applied = False  # an earlier attempt began changing the host before the link dropped
    while True:
        attempts += 1
        try:
            checked = step.check(ctx)
            if checked.done:
                outcome = Outcome.CHANGED if applied else Outcome.OK
                detail = checked.detail
            elif ctx.dry_run or step.read_only:
                outcome, detail = Outcome.WOULD_CHANGE, checked.detail
            else:
                ctx.transport.log.line(f"[{step.name}] applying: {checked.detail}")
                applied = True
                step.apply(ctx)
                outcome, detail = Outcome.CHANGED, step.verify(ctx)
            return StepReport(step.name, outcome, ctx.transport.redactor.redact(detail),
                              time.monotonic() - started, attempts)
        except ConnectionLost as exc:
            ctx.transport.log.line(f"[{step.name}] attempt {attempts}: {exc}")
            if attempts >= STEP_ATTEMPTS:
                raise
            ctx.transport.reconnect()


def provision_host(
    ctx: HostContext, steps: list[Step], address: str, on_event: EventSink = _no_events,
) -> HostReport:
    """Run ``steps`` in order over an already connected ``ctx.transport``. The first failure
    stops this host (later steps depend on earlier ones); other hosts are unaffected."""
    transport: Transport = ctx.transport
    report = HostReport(ctx.name, address, transport.log.path)
    failed = False
    for step in steps:
        if failed:
            report.steps.append(StepReport(step.name, Outcome.SKIPPED, "an earlier step failed"))
            continue
        on_event(ctx.name, step.name, None, "running")
        started = time.monotonic()
        try:
            result = run_step(ctx, step)
        except ProvisionError as exc:
            message = transport.redactor.redact(exc.message)
            if ctx.dry_run and step.read_only:
                # A check that needs earlier steps applied (e.g. nvidia-smi before the
                # driver is installed) cannot pass in a dry run: report it as pending.
                result = StepReport(step.name, Outcome.WOULD_CHANGE,
                                    f"cannot check before earlier steps are applied: {message}",
                                    time.monotonic() - started)
            else:
                result = StepReport(step.name, Outcome.FAILED, message,
                                    time.monotonic() - started, fix=exc.fix)
                failed = True
        except Exception as exc:  # a bug on one host must not stop the other hosts
            transport.log.line(traceback.format_exc())
            result = StepReport(step.name, Outcome.FAILED,
                                transport.redactor.redact(f"unexpected error: {exc!r}"),
                                time.monotonic() - started,
                                fix="this is a vgpu bug: report it with the host log")
            failed = True
        transport.log.line(f"[{step.name}] {result.outcome.value}: {result.detail}"
                           + (f" (fix: {result.fix})" if result.fix else ""))
        report.steps.append(result)
        on_event(ctx.name, step.name, result.outcome, result.detail)
    return report

"""Live progress table and the final summary (rich). Everything shown is redacted."""

from __future__ import annotations

import threading

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from vgpu.provision.report import RunReport
from vgpu.provision.step import Outcome
from vgpu.remote.redact import Redactor

STYLE = {
    Outcome.CHANGED: "yellow", Outcome.OK: "green", Outcome.WOULD_CHANGE: "cyan",
    Outcome.FAILED: "bold red", Outcome.SKIPPED: "dim",
}


class LiveTable:
    """Receives step events from worker threads; renders one row per host."""

    def __init__(self, hosts: list[str], redactor: Redactor) -> None:
        self.redactor = redactor
        self._lock = threading.Lock()
        self._rows = {h: {"step": "waiting", "changed": 0, "ok": 0, "failed": "", "note": ""}
                      for h in hosts}

    def event(self, host: str, step: str, outcome: Outcome | None, detail: str) -> None:
        with self._lock:
            row = self._rows.setdefault(host, {"step": "", "changed": 0, "ok": 0,
                                               "failed": "", "note": ""})
            row["step"] = step
            if outcome in (Outcome.CHANGED, Outcome.WOULD_CHANGE):
                row["changed"] = int(row["changed"]) + 1
            elif outcome is Outcome.OK:
                row["ok"] = int(row["ok"]) + 1
            elif outcome is Outcome.FAILED:
                row["failed"] = step
            row["note"] = self.redactor.redact(detail)[:70]

    def __rich__(self) -> Table:
        table = Table(title="vgpu provision", expand=False)
        for column in ("host", "step", "changed", "ok", "failed", "detail"):
            table.add_column(column)
        with self._lock:
            for host, row in self._rows.items():
                style = "red" if row["failed"] else ""
                table.add_row(host, str(row["step"]), str(row["changed"]), str(row["ok"]),
                              str(row["failed"]), str(row["note"]), style=style)
        return table

    def live(self, console: Console) -> Live:
        return Live(self, console=console, refresh_per_second=4, transient=True,
                    redirect_stdout=False, redirect_stderr=False)


def summary(report: RunReport, redactor: Redactor) -> Group:
    """Per host and step: changed / ok / failed, then one line per failed host."""
    steps: list[str] = []
    for host in report.hosts:
        for s in host.steps:
            if s.step not in steps:
                steps.append(s.step)
    table = Table(title="provisioning (dry run: nothing changed)" if report.dry_run
                  else "provisioning")
    table.add_column("host")
    for step in steps:
        table.add_column(step, overflow="fold")
    for host in report.hosts:
        cells: list[Text | str] = [host.host]
        by_name = {s.step: s for s in host.steps}
        for step in steps:
            s = by_name.get(step)
            if s is None:
                cells.append("")
                continue
            label = s.outcome.value + (f" (x{s.attempts})" if s.attempts > 1 else "")
            cells.append(Text(label, style=STYLE[s.outcome]))
        table.add_row(*cells)
    lines: list[Text | Table] = [table]
    changed = sum(h.count(Outcome.CHANGED) + h.count(Outcome.WOULD_CHANGE)
                  for h in report.hosts)
    ok = sum(h.count(Outcome.OK) for h in report.hosts)
    verb = "would change" if report.dry_run else "changed"
    lines.append(Text(f"{len(report.hosts)} hosts: {changed} steps {verb}, {ok} already fine, "
                      f"{len(report.failed_hosts)} hosts failed, {report.duration:.1f}s"))
    for line in report.failure_lines():
        lines.append(Text(redactor.redact(f"FAILED {line}"), style="red"))
    return Group(*lines)

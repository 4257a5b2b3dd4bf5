"""The revalidation's answer on the terminal: one row per scenario and workload with its
two comparisons, the platform fields that changed since the baseline, and what could not
run."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from vgpu.results.verdict.accuracy import ACCURACY_CHECK
from vgpu.results.verdict.compare import Check, Comparison, check_as_dict
from vgpu.results.verdict.platforms import describe_changes
from vgpu.revalidate.flow import RevalidateOutcome

_STYLE = {"PASS": "bold green", "FAIL": "bold red", "INCONCLUSIVE": "bold yellow"}


def _cell(comparison: Comparison | None) -> str:
    if comparison is None:
        return "-"
    verdict = comparison.verdict
    measured = [c for c in comparison.checks if c.metric != ACCURACY_CHECK]
    headline = measured[0] if measured else None
    if headline is None:
        return f"[{_STYLE[verdict]}]{verdict}[/]"
    ci = "" if headline.ci_pct is None else \
        f" [{headline.ci_pct[0]:+.1f}%, {headline.ci_pct[1]:+.1f}%]"
    return f"[{_STYLE[verdict]}]{verdict}[/] {headline.difference_pct:+.2f}%{ci}"


def _accuracy(check: Check | None) -> str:
    if check is None:
        return "-"
    return f"[{_STYLE[check.verdict]}]{check.verdict}[/] {check.candidate.mean:.4f}"


def render_outcome(outcome: RevalidateOutcome, console: Console) -> None:
    on_host = f" on host {outcome.host}" if outcome.host else ""
    table = Table(title=f"revalidation {outcome.state.id}{on_host}", title_justify="left")
    for column in ("scenario", "workload", "vs bare metal", "vs baseline", "accuracy",
                   "verdict"):
        table.add_column(column)
    for v in outcome.verdicts:
        verdict = v.verdict
        table.add_row(v.scenario_id, v.workload, _cell(v.vs_bare_metal),
                      _cell(v.vs_baseline), _accuracy(v.accuracy),
                      "-" if verdict is None else f"[{_STYLE[verdict]}]{verdict}[/]")
    for scenario_id in outcome.could_not_run:
        table.add_row(scenario_id, "-", "-", "-", "-", "[bold red]COULD NOT RUN[/]")
    console.print(table)
    for scenario_id, reason in outcome.could_not_run.items():
        console.print(f"[red]scenario {scenario_id} could not run:[/] {escape(reason)}")
    for v in outcome.verdicts:
        for note in v.notes:
            console.print(f"[dim]{v.scenario_id} {v.workload}: {escape(note)}[/]")
        if v.vs_baseline is not None and v.vs_baseline.platform_changes:
            console.print(f"{v.scenario_id} {v.workload}: platform since the baseline:")
            for line in describe_changes(v.vs_baseline.platform_changes):
                console.print(f"  {escape(line)}")
    for note in outcome.notes:
        console.print(f"[dim]note: {escape(note)}[/]")
    breaking = [r for r in (outcome.drift or {}).get("rows", []) if r.get("breaking")]
    if outcome.drift is not None:
        console.print(f"drift since {outcome.drift.get('before')}: "
                      f"{len(outcome.drift.get('rows', []))} change(s), "
                      f"{len(breaking)} breaking")
    console.print(verdict_line(outcome))


def verdict_line(outcome: RevalidateOutcome) -> str:
    """The one line a gate reads: the verdict and the exit code that carries it."""
    code = outcome.exit_code
    verdict = outcome.verdict
    if outcome.could_not_run and verdict != "FAIL":
        return f"[bold red]revalidation: a scenario could not run[/] (exit {code})"
    if verdict is None:
        what = "recorded as the baseline" if outcome.capture else (
            "nothing judged against a reference (no baseline of this host)"
            if outcome.needs_baseline else "nothing judged against a reference")
        return f"revalidation: {what} (exit {code})"
    undecided = [f"{v.scenario_id} {v.workload}" for v in outcome.verdicts
                 if v.gate(outcome.needs_baseline) != "PASS"]
    why = f": not decided for {', '.join(undecided)}" if verdict == "INCONCLUSIVE" else ""
    return f"revalidation verdict [{_STYLE[verdict]}]{verdict}[/]{escape(why)} (exit {code})"


def as_json(outcome: RevalidateOutcome) -> dict[str, Any]:
    return {
        "revalidation": outcome.state.id,
        "host": outcome.host,
        "verdict": outcome.verdict,
        "exit_code": outcome.exit_code,
        "drift": outcome.drift,
        "could_not_run": outcome.could_not_run,
        "verdicts": [{
            "scenario": v.scenario_id, "workload": v.workload, "series": v.series_id,
            "verdict": v.verdict,
            "vs_bare_metal": None if v.vs_bare_metal is None else v.vs_bare_metal.as_dict(),
            "vs_baseline": None if v.vs_baseline is None else v.vs_baseline.as_dict(),
            "accuracy": None if v.accuracy is None else check_as_dict(v.accuracy),
            "notes": list(v.notes),
        } for v in outcome.verdicts],
        "notes": outcome.notes,
    }

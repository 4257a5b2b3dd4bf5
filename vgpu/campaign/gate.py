"""The gate of one host: its revalidation's verdicts reduced to PASS, FAIL or
INCONCLUSIVE. A host is gated on its own pre-upgrade baseline and the accuracy check (the
question of an upgrade: did this host get worse?); the VMs' comparison with bare metal is
kept and shown, and gates too where the campaign asks (gate_on_bare_metal)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vgpu.exitcodes import overall_verdict
from vgpu.revalidate.verdicts import WorkloadVerdict


def verdict_rows(verdicts: Sequence[WorkloadVerdict]) -> list[dict[str, Any]]:
    """What the campaign keeps of each workload's verdicts (its state and report)."""
    rows = []
    for v in verdicts:
        rows.append({
            "scenario": v.scenario_id, "workload": v.workload, "series": v.series_id,
            "vs_baseline": _summary(v.vs_baseline),
            "vs_bare_metal": _summary(v.vs_bare_metal),
            "accuracy": v.accuracy.verdict if v.accuracy is not None else None,
            "notes": list(v.notes)})
    return rows


def _summary(comparison: Any) -> dict[str, Any] | None:
    if comparison is None:
        return None
    checks = [c for c in comparison.checks if c.metric != "accuracy"]
    head = checks[0] if checks else None
    return {"verdict": comparison.verdict, "why": list(comparison.why)[:3],
            "difference_pct": head.difference_pct if head is not None else None,
            "ci_pct": list(head.ci_pct) if head is not None and head.ci_pct else None,
            "metric": head.metric if head is not None else None}


def row_verdict(row: dict[str, Any], on_bare_metal: bool) -> str | None:
    """One workload's gate: FAIL if any gating comparison FAILs; None without its
    baseline comparison (bare metal alone never passes an upgraded host)."""
    baseline = row.get("vs_baseline")
    parts = [baseline["verdict"]] if baseline else []
    if row.get("accuracy"):
        parts.append(row["accuracy"])
    bare = row.get("vs_bare_metal")
    if on_bare_metal and bare:
        parts.append(bare["verdict"])
    if baseline is None:
        return "FAIL" if "FAIL" in parts else None
    return overall_verdict(parts)


def gate_verdict(rows: Sequence[dict[str, Any]], on_bare_metal: bool
                 ) -> tuple[str | None, str]:
    """The host's verdict and why, in one sentence."""
    judged = [(row, row_verdict(row, on_bare_metal)) for row in rows]
    verdict = overall_verdict([v for _, v in judged]) if judged else None

    def named(wanted: str | None) -> str:
        return ", ".join(f"{r['scenario']} {r['workload']}" + _difference(r)
                         for r, v in judged if v == wanted)

    if verdict == "PASS":
        return verdict, f"every workload held its pre-upgrade baseline ({named('PASS')})"
    if verdict == "FAIL":
        return verdict, f"slower than its pre-upgrade baseline: {named('FAIL')}"
    if verdict is None:
        return None, "no workload was judged against the host's own baseline"
    undecided = named("INCONCLUSIVE") or named(None)
    reasons = [w for r, v in judged if v != "PASS"
               for w in ((r.get("vs_baseline") or {}).get("why") or [])]
    why = reasons[0] if reasons else ("the interval holds both a pass and a regression "
                                      "(more runs decide it)")
    return verdict, f"not decided for {undecided}: {why}"


def _difference(row: dict[str, Any]) -> str:
    baseline = row.get("vs_baseline") or {}
    diff = baseline.get("difference_pct")
    return f" ({diff:+.1f}%)" if isinstance(diff, int | float) else ""

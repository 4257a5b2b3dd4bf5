"""One report of the whole campaign: JSON (the state, plus each host's time per phase) for
other tools, and HTML for people: per host its build and VIB before and after, its drift,
its verdicts, who decided, and the time each phase took."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from vgpu.campaign.state import PHASES, CampaignState, HostProgress
from vgpu.results.views.report import Note, Report, Table


def as_json(state: CampaignState) -> dict[str, Any]:
    data = {k: v for k, v in asdict(state).items() if k != "path"}
    data["state_file"] = str(state.path)
    for host, item in zip(state.hosts, data["hosts"], strict=True):
        item["seconds_per_phase"] = {name: host.phase(name).seconds for name in PHASES}
    return data


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} s"


def _verdicts_table(host: HostProgress) -> Table:
    rows = []
    for row in host.verdicts:
        base, bare = row.get("vs_baseline") or {}, row.get("vs_bare_metal") or {}
        rows.append([row["scenario"], row["workload"], base.get("verdict") or "-",
                     _pct(base), bare.get("verdict") or "-", _pct(bare),
                     row.get("accuracy") or "-"])
    return Table(["scenario", "workload", "vs own baseline", "difference", "vs bare metal",
                  "difference", "accuracy"], rows)


def _pct(summary: dict[str, Any]) -> str:
    diff, ci = summary.get("difference_pct"), summary.get("ci_pct")
    if diff is None:
        return "-"
    return f"{diff:+.2f}%" + (f" [{ci[0]:+.1f}%, {ci[1]:+.1f}%]" if ci else "")


def build(state: CampaignState) -> Report:
    report = Report(f"vgpu campaign {state.name}",
                    time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    said = state.reason or "every host passed its gate"
    report.sections.append(("Outcome", Note(f"{state.status.upper()} (exit "
                                            f"{state.exit_code}): {said}")))
    report.sections.append(("Hosts", Table(
        ["host", "phase", "verdict", "decided by", "ESXi build", "host driver",
         *(f"{p} time" for p in PHASES)],
        [[h.host, h.current or "through", h.verdict or "-", h.decided_by or "-",
          f"{h.before.get('esxi_build') or '-'} -> {h.after.get('esxi_build') or '-'}",
          f"{h.before.get('host_driver') or '-'} -> {h.after.get('host_driver') or '-'}",
          *(_seconds(h.phase(p).seconds) for p in PHASES)] for h in state.hosts])))
    for host in state.hosts:
        if host.verdicts:
            report.sections.append((f"{host.host}: verdicts", _verdicts_table(host)))
        if host.drift:
            report.sections.append((f"{host.host}: drift since its baseline", Table(
                ["field", "before", "after", "breaking"],
                [[str(r.get("field")), str(r.get("before")), str(r.get("after")),
                  "yes" if r.get("breaking") else ""] for r in host.drift])))
        details = [[p, host.phase(p).status, host.phase(p).detail or ""] for p in PHASES]
        report.sections.append((f"{host.host}: phases", Table(["phase", "status", "detail"],
                                                              details)))
        if host.left_in:
            report.sections.append((f"{host.host}: where it was left", Note(host.left_in)))
    if state.events:
        report.sections.append(("Decisions and resumes", Note("; ".join(state.events))))
    return report


def write(state: CampaignState, html_path: Path, json_path: Path) -> None:
    html_path.parent.mkdir(parents=True, exist_ok=True)
    html_path.write_text(build(state).html(), encoding="utf-8")
    json_path.write_text(json.dumps(as_json(state), indent=2) + "\n", encoding="utf-8")

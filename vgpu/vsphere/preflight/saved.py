"""Saved preflight reports: each run is saved as JSON under an id
(``preflight-<UTC time>[-scenario-<id>]``, the file's name without .json); ``find_saved``
resolves an id, a file or ``last`` for drift checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vgpu.errors import InputError, ParameterError
from vgpu.runpaths import new_run_file
from vgpu.vsphere.preflight.checks import PreflightReport

SAVED_PREFIX = "preflight-"
SAVED_RUN = "saved run"  # the parameter: the run to compare with
NONE_SAVED = "none saved"  # the reason: 'last' with no run of the inventory saved


def save_report(report: PreflightReport, directory: Path) -> Path:
    """Write the facts as JSON, one file per run, named by time (and scenario). The file's
    name without .json is the run's id, also stored inside it."""
    stamp = report.taken_at.replace(":", "").replace("-", "")
    suffix = f"-scenario-{report.scenario}" if report.scenario else ""
    path = new_run_file(directory, f"{SAVED_PREFIX}{stamp}{suffix}", ".json", "{}\n")
    report.id = path.stem
    if report.drift is not None:
        report.drift["after"] = report.id
    path.write_text(json.dumps(report.to_json(), indent=2) + "\n", encoding="utf-8")
    return path


def saved_reports(directory: Path) -> list[Path]:
    """The saved preflight runs in ``directory``, oldest first (by the time in the name,
    then by when the file was written)."""
    if not directory.is_dir():
        return []
    stamp_length = len(SAVED_PREFIX) + len("20260101T000000Z")
    return sorted(directory.glob(f"{SAVED_PREFIX}*.json"),
                  key=lambda p: (p.name[:stamp_length], p.stat().st_mtime_ns))


def load_saved(path: Path) -> dict[str, Any]:
    """A saved preflight run, or InputError naming the file when it is not one."""
    fix = "pass another run id, a file written by `vgpu preflight`, or 'last'"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ParameterError(SAVED_RUN, f"cannot read it as preflight facts: {exc}", fix,
                             file=str(path)) from None
    hosts = data.get("hosts") if isinstance(data, dict) else None
    if not isinstance(hosts, list) or not all(
            isinstance(h, dict) and isinstance(h.get("name"), str) for h in hosts):
        raise InputError.single(str(path), "hosts", "not preflight facts: no list of hosts "
                                "with names", fix=fix)
    data.setdefault("id", path.stem)
    return data


def find_saved(against: str, directory: Path, inventory_path: Path) -> Path:
    """``last`` (the newest run saved for this inventory), a saved file's path, or a run
    id (its name, with or without .json) in ``directory``."""
    if against == "last":
        wanted = inventory_path.resolve()
        mine = [p for p in saved_reports(directory) if _saved_inventory(p) == wanted]
        if not mine:
            raise ParameterError(SAVED_RUN, f"no preflight of {inventory_path} is saved in "
                                 f"{directory}", "save one first (`vgpu preflight`)",
                                 reason=NONE_SAVED)
        return mine[-1]
    for candidate in (Path(against), directory / against, directory / f"{against}.json"):
        if candidate.is_file():
            return candidate
    known = ", ".join(p.stem for p in saved_reports(directory)[-5:]) or "none"
    raise ParameterError(SAVED_RUN, f"'{against}' is neither a file nor a run id in "
                         f"{directory}", f"use 'last' or one of the latest ids: {known}")


def _saved_inventory(path: Path) -> Path | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    inventory = data.get("inventory") if isinstance(data, dict) else None
    return Path(inventory).resolve() if isinstance(inventory, str) else None

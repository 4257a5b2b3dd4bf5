"""A revalidation's progress on disk, so that an interrupted one resumes where it stopped:
one JSON file per revalidation, rewritten atomically after every scenario."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vgpu.errors import InputError
from vgpu.runpaths import new_run_file

PREFIX = "revalidate-"


@dataclass
class ScenarioProgress:
    """What happened to one scenario: ``done`` with its series per workload, or
    ``could-not-run`` with the reason (retried on --resume)."""

    scenario_id: str
    status: str = "pending"  # pending | done | could-not-run
    reason: str | None = None
    series: dict[str, str] = field(default_factory=dict)  # workload label -> series id


@dataclass
class Revalidation:
    path: Path
    inventory: str
    baseline: str | None
    started_at: float
    scenarios: list[ScenarioProgress]
    drift: dict[str, Any] | None = None
    preflight_id: str | None = None
    finished: bool = False

    @property
    def id(self) -> str:
        return self.path.stem

    def progress(self, scenario_id: str) -> ScenarioProgress:
        return next(p for p in self.scenarios if p.scenario_id == scenario_id)

    def save(self) -> None:
        data = {k: v for k, v in asdict(self).items() if k != "path"}
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        os.replace(temporary, self.path)


def start(directory: Path, inventory: Path, baseline: str | None,
          scenario_ids: list[str]) -> Revalidation:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = new_run_file(directory, f"{PREFIX}{stamp}", ".json", "{}\n")
    state = Revalidation(path, str(inventory.resolve()), baseline, time.time(),
                         [ScenarioProgress(s) for s in scenario_ids])
    state.save()
    return state


def _load(path: Path) -> Revalidation:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        scenarios = [ScenarioProgress(**s) for s in data.pop("scenarios")]
        return Revalidation(path=path, scenarios=scenarios, **data)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise InputError.single(str(path), "(file)", f"not a revalidation state: {exc}",
                                fix="delete it and run without --resume") from None


def unfinished(directory: Path, inventory: Path) -> Revalidation | None:
    """The newest revalidation of this inventory, when it did not finish."""
    wanted = str(inventory.resolve())
    mine = [state for state in map(_load, directory.glob(f"{PREFIX}*.json"))
            if state.inventory == wanted]
    if not mine:
        return None
    newest = max(mine, key=lambda state: state.started_at)
    return None if newest.finished else newest

"""A revalidation's progress on disk, so that an interrupted one resumes where it stopped:
one JSON file per revalidation, rewritten atomically after every scenario."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vgpu.errors import InputError, ParameterError
from vgpu.runpaths import new_run_file

PREFIX = "revalidate-"
RESUMED = "resumed revalidation"  # the parameter: the unfinished run --resume continues


@dataclass
class ScenarioProgress:
    """What happened to one scenario: ``done`` with its series per workload, or
    ``could-not-run`` with the reason (retried on --resume)."""

    scenario_id: str
    status: str = "pending"  # pending | done | could-not-run
    reason: str | None = None
    series: dict[str, str] = field(default_factory=dict)  # workload label -> series id


@dataclass(frozen=True)
class RunKey:
    """What makes two revalidations the same run for --resume: the host pinned, the
    baseline sets recorded and judged, capturing or not, the workloads."""

    host: str | None = None
    recorded: str | None = None
    judged: str | None = None
    capture: bool = False
    workloads: list[str] = field(default_factory=list)

    def describe(self) -> str:
        what = f"capture of '{self.recorded}'" if self.capture \
            else f"judged against '{self.judged}'"
        workloads = f", workloads {', '.join(self.workloads)}" if self.workloads else ""
        return f"host {self.host or '(none pinned)'}, {what}{workloads}"


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
    key: RunKey | None = None  # None: saved before runs were keyed (refused on resume)

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
          scenario_ids: list[str], key: RunKey | None = None,
          name: str | None = None) -> Revalidation:
    """A new revalidation's state; ``name``: its file's stem (a campaign names each host's
    revalidation so that its resume finds that one, finished or not)."""
    if name is not None:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{name}.json"
    else:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        path = new_run_file(directory, f"{PREFIX}{stamp}", ".json", "{}\n")
    state = Revalidation(path, str(inventory.resolve()), baseline, time.time(),
                         [ScenarioProgress(s) for s in scenario_ids], key=key)
    state.save()
    return state


def _load(path: Path) -> Revalidation:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        scenarios = [ScenarioProgress(**s) for s in data.pop("scenarios")]
        key = data.pop("key", None)
        return Revalidation(path=path, scenarios=scenarios,
                            key=RunKey(**key) if key is not None else None, **data)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise InputError.single(str(path), "(file)", f"not a revalidation state: {exc}",
                                fix="delete it and run without --resume") from None


def named(directory: Path, name: str) -> Revalidation | None:
    """The revalidation saved as ``name``, finished or not; None when there is none."""
    path = directory / f"{name}.json"
    return _load(path) if path.is_file() else None


def unfinished(directory: Path, inventory: Path) -> Revalidation | None:
    """The newest revalidation of this inventory, when it did not finish."""
    wanted = str(inventory.resolve())
    mine = [state for state in map(_load, directory.glob(f"{PREFIX}*.json"))
            if state.inventory == wanted]
    if not mine:
        return None
    newest = max(mine, key=lambda state: state.started_at)
    return None if newest.finished else newest


def refuse_other_run(found: Revalidation, key: RunKey) -> None:
    """InputError (exit 2, nothing run) when the unfinished revalidation --resume would
    continue is not this run: another host, other baseline sets, capture or not, other
    workloads. Its finished scenarios must never count for another host."""
    if found.key == key:
        return
    theirs = found.key.describe() if found.key is not None else "an unkeyed earlier run"
    raise ParameterError(
        RESUMED,
        f"the unfinished revalidation {found.id} is {theirs}; this one is {key.describe()}",
        fix=(f"resume it with the same options (--host {found.key.host})"
             if found.key is not None and found.key.host else "resume it with its options")
        + f", or run without --resume (or delete {found.path} to drop it)")

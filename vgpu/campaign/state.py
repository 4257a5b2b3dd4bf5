"""A campaign's progress on disk: one JSON file per campaign, rewritten atomically at the
start and the end of every phase, so that `vgpu campaign run --resume` after a kill at any
moment continues where it stopped: a phase found ``started`` is run again, and every phase
checks the lab before it changes anything (a drained host is not drained twice, an upgraded
host not upgraded twice, a finished revalidation not benched twice)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vgpu.errors import InputError

PHASES = ("baseline", "drain", "upgrade", "undrain", "revalidate", "gate")
PENDING, STARTED, DONE, FAILED = "pending", "started", "done", "failed"
# the campaign as a whole
RUNNING, PAUSED, STOPPED, PASSED = "running", "paused", "stopped", "passed"
DEFAULT_DIR = Path("vgpu-results/campaign")


@dataclass
class PhaseRecord:
    status: str = PENDING
    started_at: float | None = None
    ended_at: float | None = None
    detail: str | None = None  # what was done, found or refused

    @property
    def seconds(self) -> float | None:
        if self.started_at is None or self.ended_at is None:
            return None
        return self.ended_at - self.started_at


@dataclass
class HostProgress:
    host: str
    phases: dict[str, PhaseRecord] = field(
        default_factory=lambda: {name: PhaseRecord() for name in PHASES})
    hardware_uuid: str | None = None
    verdict: str | None = None  # the gate's: PASS, FAIL, INCONCLUSIVE; None: not judged
    decided_by: str | None = None  # "verdict", or who promoted an undecided host and how
    before: dict[str, str | None] = field(default_factory=dict)  # esxi_build, host_driver
    after: dict[str, str | None] = field(default_factory=dict)
    drift: list[dict[str, Any]] = field(default_factory=list)  # the revalidation's rows
    verdicts: list[dict[str, Any]] = field(default_factory=list)  # per scenario/workload
    left_in: str | None = None  # the host's state when the campaign stopped at it
    reruns: int = 0  # `continue --rerun`s: each judges the host with a new revalidation

    def revalidation_name(self, campaign: str, capture: bool) -> str:
        """The state name of the host's capture or of its current revalidation: kept over
        resumes, a new one after each rerun."""
        kind = "capture" if capture else f"after{self.reruns or ''}"
        return f"campaign-{campaign}-{self.host}-{kind}"

    def phase(self, name: str) -> PhaseRecord:
        return self.phases[name]

    @property
    def current(self) -> str | None:
        """The first phase not done, or None when the host is through."""
        return next((name for name in PHASES if self.phases[name].status != DONE), None)


@dataclass
class CampaignState:
    path: Path
    name: str
    campaign_file: str
    started_at: float
    hosts: list[HostProgress]
    status: str = RUNNING
    reason: str | None = None  # why it paused or stopped
    exit_code: int | None = None
    ended_at: float | None = None
    events: list[str] = field(default_factory=list)  # decisions and resumes, timestamped

    def host(self, name: str) -> HostProgress:
        return next(h for h in self.hosts if h.host == name)

    def note(self, text: str) -> None:
        self.events.append(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {text}")

    def save(self) -> None:
        data = {k: v for k, v in asdict(self).items() if k != "path"}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        os.replace(temporary, self.path)

    def begin(self, host: HostProgress, phase: str) -> PhaseRecord:
        record = host.phases[phase]
        if record.status == STARTED:
            self.note(f"{host.host} {phase}: resumed after an interruption")
        record.status, record.started_at, record.ended_at = STARTED, time.time(), None
        self.save()
        return record

    def end(self, host: HostProgress, phase: str, detail: str, status: str = DONE) -> None:
        record = host.phases[phase]
        record.status, record.ended_at, record.detail = status, time.time(), detail
        self.save()


def path_for(directory: Path, name: str) -> Path:
    return directory / f"campaign-{name}.json"


def new_state(directory: Path, name: str, campaign_file: Path,
              hosts: list[str]) -> CampaignState:
    state = CampaignState(path_for(directory, name), name, str(campaign_file.resolve()),
                          time.time(), [HostProgress(h) for h in hosts])
    state.save()
    return state


def load(directory: Path, name: str) -> CampaignState | None:
    """The saved campaign ``name``, or None; InputError naming the file when it is not
    one."""
    path = path_for(directory, name)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        hosts = []
        for item in data.pop("hosts"):
            phases = {k: PhaseRecord(**v) for k, v in item.pop("phases").items()}
            hosts.append(HostProgress(phases=phases, **item))
        return CampaignState(path=path, hosts=hosts, **data)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise InputError.single(str(path), "(file)", f"not a campaign state: {exc}",
                                fix="restore it, or delete it to start the campaign "
                                    "anew") from None

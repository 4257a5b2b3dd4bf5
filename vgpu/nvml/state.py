"""The layout state file: what vgpu created on one GPU and what was there before, so
`vgpu mig destroy` removes only vgpu's instances and `--restore` can put the rest back.
Default place: $VGPU_STATE_DIR, else $XDG_STATE_HOME/vgpu, else ~/.local/state/vgpu, one
file per GPU: mig-layout-<gpu index>.json."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vgpu.nvml.types import ComputeInstance, GpuInstance
from vgpu.runpaths import state_dir

STATE_VERSION = 1


def default_state_dir() -> Path:
    return state_dir()


@dataclass
class CreatedInstance:
    """One GPU instance + its compute instance that vgpu created for one plan slice."""

    owner: str
    profile: str
    profile_id: int
    start: int
    size: int
    gpu_instance_id: int
    compute_instance_id: int | None = None
    uuid: str | None = None


@dataclass
class SavedInstance:
    """A GPU instance that existed before vgpu touched the GPU (restorable)."""

    profile_id: int
    profile: str
    start: int
    size: int
    gpu_instance_id: int
    compute_slices: list[int] = field(default_factory=list)

    @classmethod
    def of(cls, gi: GpuInstance, profile: str) -> SavedInstance:
        return cls(gi.profile_id, profile, gi.start, gi.size, gi.id,
                   [c.slice_count for c in gi.compute_instances])

    def describe(self) -> str:
        return f"{self.profile}@{self.start} (GPU instance {self.gpu_instance_id})"


@dataclass
class LayoutState:
    gpu_index: int
    gpu_uuid: str
    gpu_model: str
    simulated: bool
    scenario: str | None = None
    mig_enabled_by_vgpu: bool = False
    before: list[SavedInstance] = field(default_factory=list)
    replaced: list[SavedInstance] = field(default_factory=list)
    created: list[CreatedInstance] = field(default_factory=list)
    updated_at: str = ""
    version: int = STATE_VERSION

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LayoutState:
        return cls(**{
            **data,
            "before": [SavedInstance(**s) for s in data.get("before", [])],
            "replaced": [SavedInstance(**s) for s in data.get("replaced", [])],
            "created": [CreatedInstance(**c) for c in data.get("created", [])],
        })

    def is_ours(self, gi: GpuInstance) -> CreatedInstance | None:
        for c in self.created:
            if (c.gpu_instance_id, c.profile_id, c.start) == (gi.id, gi.profile_id, gi.start):
                return c
        return None

    def owns_compute_instance(self, ci: ComputeInstance, record: CreatedInstance) -> bool:
        return record.compute_instance_id == ci.id


class StateStore:
    """Reads and writes layout state files. ``path`` overrides the file for every GPU
    (one GPU per call) and is meant for tests and scripted use."""

    def __init__(self, directory: Path | None = None, path: Path | None = None) -> None:
        self.directory = directory or default_state_dir()
        self.path = path

    def file_for(self, gpu: int) -> Path:
        return self.path or self.directory / f"mig-layout-{gpu}.json"

    def load(self, gpu: int) -> LayoutState | None:
        file = self.file_for(gpu)
        if not file.exists():
            return None
        return LayoutState.from_json(json.loads(file.read_text(encoding="utf-8")))

    def save(self, state: LayoutState) -> Path:
        file = self.file_for(state.gpu_index)
        file.parent.mkdir(parents=True, exist_ok=True)
        state.updated_at = datetime.now(UTC).isoformat(timespec="seconds")
        fd, tmp = tempfile.mkstemp(dir=file.parent, prefix=".mig-layout-")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(asdict(state), fh, indent=2)
        os.replace(tmp, file)
        return file

    def remove(self, gpu: int) -> None:
        self.file_for(gpu).unlink(missing_ok=True)

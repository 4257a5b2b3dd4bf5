"""The desired MIG layout of one GPU: which profile at which start, for which instance.
Plain data with a JSON form, so the remote entry point can take it without the planner."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vgpu import mig


@dataclass(frozen=True)
class SliceSpec:
    profile: str  # "4g.40gb"
    start: int  # first memory slice the plan put it at
    owner: str  # the planned instance (VM name in vSphere scenarios)


@dataclass(frozen=True)
class LayoutSpec:
    gpu: int  # local GPU index
    model: str  # vgpu.mig catalogue key
    slices: tuple[SliceSpec, ...]
    scenario: str | None = None

    @property
    def gpu_model(self) -> mig.GpuModel:
        return mig.GPU_MODELS[self.model]

    def placements(self) -> list[mig.MigPlacement]:
        model = self.gpu_model
        return [mig.MigPlacement(model.profile(s.profile), s.start, owner=s.owner)
                for s in self.slices]

    def to_json(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "model": self.model, "scenario": self.scenario,
                "slices": [{"profile": s.profile, "start": s.start, "owner": s.owner}
                           for s in self.slices]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LayoutSpec:
        try:
            model = mig.gpu_model(str(data["model"]))
            slices = tuple(SliceSpec(model.profile(str(s["profile"])).name, int(s["start"]),
                                     str(s.get("owner", f"slice-{k}")))
                           for k, s in enumerate(data["slices"]))
            return cls(gpu=int(data.get("gpu", 0)), model=model.key, slices=slices,
                       scenario=data.get("scenario"))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a MIG layout: {exc!r}; expected {{gpu, model, slices: "
                             f"[{{profile, start, owner}}]}}") from None

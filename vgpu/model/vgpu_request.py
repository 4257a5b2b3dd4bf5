"""What one vGPU string in a scenario asks for, parsed against the scenario's GPU model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from vgpu import mig

VgpuKind = Literal["mig", "timesliced", "passthrough"]


@dataclass(frozen=True)
class VgpuRequest:
    kind: VgpuKind
    gpu: mig.GpuModel
    profile: mig.MigProfile | None = None
    timesliced_type: str | None = None

    @property
    def label(self) -> str:
        if self.profile is not None:
            return self.profile.name
        return self.timesliced_type or "passthrough"

    def vgpu_type(self, board: str | None = None) -> str | None:
        """NVIDIA's vGPU type name (None for passthrough)."""
        if self.profile is not None:
            return self.profile.vgpu_type(board or self.gpu.board)
        if self.timesliced_type is not None:
            if board is None:
                return self.timesliced_type
            return f"{board}-{self.timesliced_type.split('-', 1)[1]}"
        return None

    @property
    def framebuffer_gb(self) -> int:
        if self.profile is not None:
            return self.profile.memory_gb
        if self.timesliced_type is not None:
            return int(self.timesliced_type.rsplit("-", 1)[1].rstrip("C"))
        return self.gpu.memory_gb


def parse_vgpu(text: str, gpu: mig.GpuModel) -> VgpuRequest:
    """'passthrough', a MIG profile in any accepted spelling, or a time-sliced type.
    Raises mig.ProfileParseError naming what would be valid."""
    raw = str(text).strip()
    if raw.lower() in {"passthrough", "whole", "whole-gpu"}:
        return VgpuRequest("passthrough", gpu)
    try:
        return VgpuRequest("mig", gpu, profile=mig.parse_mig_profile(raw, gpu))
    except mig.ProfileParseError as mig_error:
        try:
            return VgpuRequest("timesliced", gpu,
                               timesliced_type=mig.parse_timesliced_type(raw, gpu))
        except mig.ProfileParseError:
            raise mig.ProfileParseError(
                f"{mig_error}; or a time-sliced type: {', '.join(gpu.timesliced_types())}; "
                "or 'passthrough'"
            ) from None

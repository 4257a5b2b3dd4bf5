"""Compare vgpu's MIG catalogue (vgpu.mig) for the local GPU model with what NVML reports:
profile ids per profile index, names, compute slices, maximum counts and placements.
Read-only; works with MIG mode off where the driver lists profiles then."""

from __future__ import annotations

from dataclasses import dataclass

from vgpu import mig
from vgpu.nvml.types import GpuInstanceProfile


@dataclass(frozen=True)
class Difference:
    profile: str
    field: str
    catalogue: str
    nvml: str

    def __str__(self) -> str:
        return f"{self.profile}: {self.field}: catalogue {self.catalogue}, NVML {self.nvml}"


def compare_catalogue(model: mig.GpuModel, reported: list[GpuInstanceProfile]
                      ) -> list[Difference]:
    by_index = {p.index: p for p in reported}
    out: list[Difference] = []
    for profile in model.profiles:
        shape = profile.shape
        got = by_index.pop(shape.nvml_index, None)
        if got is None:
            out.append(Difference(profile.name, "profile index",
                                  f"{shape.nvml_index} (id {shape.nvml_id})", "not offered"))
            continue
        checks = [
            ("name", profile.name, got.name),
            ("profile id", str(shape.nvml_id), str(got.id)),
            ("compute slices", str(profile.compute_slices), str(got.slice_count)),
            ("max count", str(shape.max_count), str(got.instance_count)),
            ("placements (start:size)",
             " ".join(f"{s}:{profile.memory_slices}" for s in shape.starts),
             " ".join(f"{p.start}:{p.size}" for p in got.placements)),
        ]
        out += [Difference(profile.name, f, want, have) for f, want, have in checks
                if want != have]
    for extra in sorted(by_index.values(), key=lambda p: p.index):
        out.append(Difference(extra.name, "profile index", "absent",
                              f"{extra.index} (id {extra.id}, {extra.slice_count} compute "
                              f"slices, placements "
                              f"{' '.join(f'{p.start}:{p.size}' for p in extra.placements)})"))
    return out

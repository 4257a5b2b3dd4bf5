"""Compare vgpu's MIG catalogue (vgpu.mig) for the local GPU model with what NVML reports:
profile ids per profile index, names, compute slices, maximum counts and placements.
Read-only; works with MIG mode off where the driver lists profiles then."""

from __future__ import annotations

from dataclasses import dataclass

from vgpu import mig
from vgpu.errors import ParameterError
from vgpu.nvml.backend import GpuBackend
from vgpu.nvml.errors import GPU_INDEX, NvmlUnavailable
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
    """Every difference; placements are compared only where the driver listed them."""
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
        ]
        if got.placements_known:
            checks.append(("placements (start:size)",
                           " ".join(f"{s}:{profile.memory_slices}" for s in shape.starts),
                           " ".join(f"{p.start}:{p.size}" for p in got.placements)))
        out += [Difference(profile.name, f, want, have) for f, want, have in checks
                if want != have]
    for extra in sorted(by_index.values(), key=lambda p: p.index):
        out.append(Difference(extra.name, "profile index", "absent",
                              f"{extra.index} (id {extra.id}, {extra.slice_count} compute "
                              f"slices, placements "
                              f"{' '.join(f'{p.start}:{p.size}' for p in extra.placements)})"))
    return out


@dataclass
class CatalogueReport:
    gpu: int
    model: mig.GpuModel
    differences: list[Difference]
    notes: list[str]


def check_catalogue(backend: GpuBackend, gpu: int) -> CatalogueReport:
    """Read the local GPU's profiles through ``backend`` and compare them (read-only)."""
    info = next((g for g in backend.gpus() if g.index == gpu), None)
    if info is None:
        raise ParameterError(GPU_INDEX, f"this machine has no GPU {gpu}",
                             "pick one from `vgpu mig status`")
    model = info.model
    if model is None:
        raise NvmlUnavailable(f"GPU {gpu} ({info.name}, PCI device 0x{info.pci_device_id:04X}) "
                              "is not in vgpu's MIG catalogue")
    reported = backend.gpu_instance_profiles(gpu)
    notes: list[str] = []
    if not reported:
        mode = backend.mig_mode(gpu)
        hint = ("; this driver lists profiles only with MIG mode on: run it again once "
                "MIG mode is on (`vgpu mig apply` can switch it on)") if not mode.current else ""
        raise NvmlUnavailable(f"NVML lists no MIG profiles on GPU {gpu} (MIG mode "
                              f"{mode.describe()}){hint}")
    if not all(p.placements_known for p in reported):
        notes.append("the driver lists no placements now (MIG mode off?); placements were "
                     "not compared")
    if model.placements_assumed:
        notes.append(f"{model.key} placements in the catalogue are assumed equal to H100's "
                     "(no published capture)")
    return CatalogueReport(gpu, model, compare_catalogue(model, reported), notes)

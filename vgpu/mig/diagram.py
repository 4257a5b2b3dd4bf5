"""MIG layouts drawn as text: which memory slices each instance of one GPU occupies."""

from __future__ import annotations

from collections.abc import Sequence

from vgpu.mig.catalogue import GpuModel
from vgpu.mig.solver import MigPlacement


def slot_diagram(gpu: GpuModel, placements: Sequence[MigPlacement], *, label: str = "GPU",
                 cell: int = 7) -> list[str]:
    """Text rows showing which memory slice each instance occupies, e.g.

        GPU 0  |0      |1      |2      |3      |4      |5      |6      |7      |
               |4g.40gb vm-a                   |2g.20gb vm-b   |1g.10gb|free   |
    """
    header = f"{label:<8}|" + "".join(f"{i:<{cell}}|" for i in range(gpu.memory_slices))
    by_start = {p.start: p for p in placements}
    row = " " * 8 + "|"
    slot = 0
    while slot < gpu.memory_slices:
        p = by_start.get(slot)
        if p is None:
            row += f"{'free':<{cell}}|"
            slot += 1
            continue
        width = p.profile.memory_slices * (cell + 1) - 1
        text = p.profile.name + (f" {p.owner}" if p.owner else "")
        row += f"{text[:width]:<{width}}|"
        slot += p.profile.memory_slices
    return [header, row]

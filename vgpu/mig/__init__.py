"""MIG as vgpu knows it, pure (standard library only, no NVML): the catalogue of GPU
geometries and profiles (``catalogue``), the placement solver (``solver``), the text
diagram of a layout (``diagram``) and NVIDIA mig-parted configs (``migparted``, not
re-exported here: it needs PyYAML, and this package also runs on bare-metal hosts)."""

from vgpu.mig.catalogue import (
    GPU_MODELS,
    BoardVariant,
    GpuModel,
    MigProfile,
    ProfileParseError,
    ProfileShape,
    board_for_pci,
    canonical_gpu_key,
    gpu_model,
    gpu_model_for_pci,
    gpu_model_names,
    parse_mig_profile,
    parse_timesliced_type,
    with_board,
)
from vgpu.mig.diagram import slot_diagram
from vgpu.mig.solver import (
    MigPlacement,
    PlacementResult,
    Suggestion,
    all_start_combinations,
    enumerate_layouts,
    explain_failure,
    is_placeable,
    place,
    solve,
    suggest,
)

__all__ = [
    "GPU_MODELS", "BoardVariant", "GpuModel", "MigPlacement", "MigProfile", "PlacementResult",
    "ProfileParseError", "ProfileShape", "Suggestion", "all_start_combinations",
    "board_for_pci", "canonical_gpu_key", "enumerate_layouts", "explain_failure",
    "gpu_model", "gpu_model_for_pci", "gpu_model_names", "is_placeable", "parse_mig_profile",
    "parse_timesliced_type", "place", "slot_diagram", "solve", "suggest", "with_board",
]

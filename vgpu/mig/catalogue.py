"""MIG catalogue: GPU geometries, their profiles and board codes. Pure: no I/O, no NVML.

One table per GPU geometry is the single source of truth: profile names (``1g.10gb``),
vGPU type names (``A100D-1-10C``, ``grid_a100d-1-10c``) and NVML ids all derive from it.
Geometry follows NVIDIA's MIG User Guide: a GPU has memory slices (8 on 7-slice GPUs) and
compute slices; an instance occupies ``memory_slices`` consecutive memory slices from one
of its allowed start positions, and instances may not overlap.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

# NVML GPU-instance profile *index* constants (pynvml NVML_GPU_INSTANCE_PROFILE_*). The
# profile *id* that later NVML calls take is a different number; both live in the table.
_IDX_1_SLICE, _IDX_2_SLICE, _IDX_3_SLICE, _IDX_4_SLICE, _IDX_7_SLICE = 0, 1, 2, 3, 4
_IDX_1_SLICE_REV1, _IDX_2_SLICE_REV1, _IDX_1_SLICE_REV2 = 7, 8, 9


@dataclass(frozen=True)
class ProfileShape:
    """Geometry of one MIG profile kind on one GPU family."""

    compute_slices: int
    memory_slices: int
    max_count: int
    starts: tuple[int, ...]
    nvml_index: int
    nvml_id: int
    media_extensions: bool = False


@dataclass(frozen=True)
class MigProfile:
    """One MIG profile of one GPU model, e.g. ``1g.10gb`` on an A100 80GB."""

    gpu: str
    shape: ProfileShape
    memory_gb: int

    @property
    def compute_slices(self) -> int:
        return self.shape.compute_slices

    @property
    def memory_slices(self) -> int:
        return self.shape.memory_slices

    @functools.cached_property
    def name(self) -> str:
        suffix = "+me" if self.shape.media_extensions else ""
        return f"{self.shape.compute_slices}g.{self.memory_gb}gb{suffix}"

    def vgpu_type(self, board: str) -> str:
        """NVIDIA's vGPU type name, e.g. ``A100D-1-10C`` (``...CME`` with media engines)."""
        suffix = "CME" if self.shape.media_extensions else "C"
        return f"{board}-{self.shape.compute_slices}-{self.memory_gb}{suffix}"

    def __str__(self) -> str:
        return self.name


FormFactor = str  # pcie | sxm | nvl, as the inventory's gpus[].form_factor


@dataclass(frozen=True)
class BoardVariant:
    """One physical form of a GPU model: the PCI device id it shows and the board code
    NVIDIA's vGPU type names use for it. The board follows the device, not the model: an
    80 GB A100 is A100D as a PCIe card and A100DX on an HGX board."""

    device_id: int
    form_factor: FormFactor
    board: str


@dataclass(frozen=True)
class GpuModel:
    """A MIG-capable GPU model and everything vgpu derives from it."""

    key: str
    display_name: str
    memory_gb: int
    memory_slices: int
    compute_slices: int
    board_codes: tuple[str, ...]
    pci_device_ids: tuple[int, ...]
    mmio_size_gb: int
    profiles: tuple[MigProfile, ...]
    timesliced_sizes_gb: tuple[int, ...]
    placements_assumed: bool = False
    aliases: tuple[str, ...] = ()
    variants: tuple[BoardVariant, ...] = ()  # only device ids whose board is known

    @property
    def board(self) -> str:
        """The board code of the model's first (PCIe) variant: the default."""
        return self.board_codes[0]

    def variant_for_pci(self, device_id: int) -> BoardVariant | None:
        return next((v for v in self.variants if v.device_id == device_id), None)

    def board_for_pci(self, device_id: int) -> str:
        """The board code of the GPU with this PCI device id; the default board for a
        device id whose board is not known."""
        variant = self.variant_for_pci(device_id)
        return variant.board if variant else self.board

    def board_for_form_factor(self, form_factor: FormFactor | None) -> str:
        """The board code of this model's variant in ``form_factor``; the default board
        where the model has no variant of that form."""
        variant = next((v for v in self.variants if v.form_factor == form_factor), None)
        return variant.board if variant else self.board

    def profile(self, name: str) -> MigProfile:
        for p in self.profiles:
            if p.name == name:
                return p
        raise KeyError(name)

    def profile_names(self) -> list[str]:
        return [p.name for p in self.profiles]

    def by_nvml_id(self, nvml_id: int) -> MigProfile:
        for p in self.profiles:
            if p.shape.nvml_id == nvml_id:
                return p
        raise KeyError(nvml_id)

    def timesliced_types(self, board: str | None = None) -> list[str]:
        return [f"{board or self.board}-{gb}C" for gb in self.timesliced_sizes_gb]

    def host_type_candidates(self, vgpu_type: str, board: str | None = None) -> list[str]:
        """Lowercase names an ESXi host may list for a vGPU type, under ``board`` (or the
        type's own board) first and then every other board code of the model, so a type
        planned for one form factor still matches a host whose GPUs are another. The
        prefix differs by GPU generation and is not documented, so callers match against
        what the host offers."""
        first = board or vgpu_type.split("-", 1)[0]
        boards = dict.fromkeys([first.upper(), *self.board_codes])
        return [f"{prefix}_{with_board(vgpu_type, b).lower()}"
                for b in boards for prefix in ("grid", "nvidia")]


def with_board(vgpu_type: str, board: str) -> str:
    """The vGPU type under another board code: ``A100D-1-10C`` -> ``A100DX-1-10C``."""
    return f"{board}-{vgpu_type.split('-', 1)[1]}"


def _seven_slice_shapes() -> dict[str, ProfileShape]:
    return {
        "1g": ProfileShape(1, 1, 7, (0, 1, 2, 3, 4, 5, 6), _IDX_1_SLICE, 19),
        "1g+me": ProfileShape(1, 1, 1, (0, 1, 2, 3, 4, 5, 6), _IDX_1_SLICE_REV1, 20, True),
        "1g.2x": ProfileShape(1, 2, 4, (0, 2, 4, 6), _IDX_1_SLICE_REV2, 15),
        "2g": ProfileShape(2, 2, 3, (0, 2, 4), _IDX_2_SLICE, 14),
        "3g": ProfileShape(3, 4, 2, (0, 4), _IDX_3_SLICE, 9),
        "4g": ProfileShape(4, 4, 1, (0,), _IDX_4_SLICE, 5),
        "7g": ProfileShape(7, 8, 1, (0,), _IDX_7_SLICE, 0),
    }


def _seven_slice_gpu(
    key: str, display: str, sizes: dict[str, int], boards: tuple[str, ...],
    pci: tuple[int, ...], mmio: int, timesliced: tuple[int, ...], *,
    assumed: bool = False, aliases: tuple[str, ...] = (),
    variants: tuple[BoardVariant, ...] = (),
) -> GpuModel:
    shapes = _seven_slice_shapes()
    profiles = tuple(MigProfile(key, shapes[k], gb) for k, gb in sizes.items())
    return GpuModel(
        key=key, display_name=display, memory_gb=sizes["7g"], memory_slices=8,
        compute_slices=7, board_codes=boards, pci_device_ids=pci, mmio_size_gb=mmio,
        profiles=profiles, timesliced_sizes_gb=timesliced, placements_assumed=assumed,
        aliases=aliases, variants=variants,
    )


def _sizes(one: int, two: int, half: int, full: int) -> dict[str, int]:
    return {"1g": one, "1g+me": one, "1g.2x": two, "2g": two, "3g": half, "4g": half,
            "7g": full}


_A30 = GpuModel(
    key="A30", display_name="NVIDIA A30 24GB", memory_gb=24, memory_slices=4,
    compute_slices=4, board_codes=("A30",), pci_device_ids=(0x20B7,), mmio_size_gb=64,
    profiles=(
        MigProfile("A30", ProfileShape(1, 1, 4, (0, 1, 2, 3), _IDX_1_SLICE, 14), 6),
        MigProfile("A30", ProfileShape(1, 1, 1, (0, 1, 2, 3), _IDX_1_SLICE_REV1, 21, True), 6),
        MigProfile("A30", ProfileShape(2, 2, 2, (0, 2), _IDX_2_SLICE, 5), 12),
        MigProfile("A30", ProfileShape(2, 2, 1, (0, 2), _IDX_2_SLICE_REV1, 6, True), 12),
        MigProfile("A30", ProfileShape(4, 4, 1, (0,), _IDX_4_SLICE, 0), 24),
    ),
    timesliced_sizes_gb=(24, 12, 8, 6, 4),
    aliases=("A30-24GB",),
    variants=(BoardVariant(0x20B7, "pcie", "A30"),),
)

GPU_MODELS: dict[str, GpuModel] = {
    m.key: m
    for m in (
        _seven_slice_gpu("A100-40GB", "NVIDIA A100 40GB", _sizes(5, 10, 20, 40), ("A100",),
                         (0x20B0, 0x20B1, 0x20F1, 0x20F6), 128, (40, 20, 10, 8, 5, 4),
                         aliases=("A100",),
                         variants=(BoardVariant(0x20F1, "pcie", "A100"),
                                   BoardVariant(0x20B0, "sxm", "A100"))),
        _seven_slice_gpu("A100-80GB", "NVIDIA A100 80GB", _sizes(10, 20, 40, 80),
                         ("A100D", "A100DX"), (0x20B2, 0x20B5, 0x20F3, 0x20F5), 256,
                         (80, 40, 20, 16, 10, 8, 4), aliases=("A100D", "A100DX"),
                         variants=(BoardVariant(0x20B5, "pcie", "A100D"),
                                   BoardVariant(0x20B2, "sxm", "A100DX"))),
        _A30,
        _seven_slice_gpu("H100-80GB", "NVIDIA H100 80GB", _sizes(10, 20, 40, 80),
                         ("H100", "H100XM"), (0x2330, 0x2331, 0x2322, 0x2324), 256,
                         (80, 40, 20, 16, 10, 8, 4), aliases=("H100", "H100XM"),
                         variants=(BoardVariant(0x2331, "pcie", "H100"),
                                   BoardVariant(0x2330, "sxm", "H100XM"))),
        _seven_slice_gpu("H100-94GB", "NVIDIA H100 NVL 94GB", _sizes(12, 24, 47, 94),
                         ("H100L",), (0x2321, 0x233A), 256, (94, 47, 23, 15, 11, 6, 4),
                         aliases=("H100-NVL", "H100L"),
                         variants=(BoardVariant(0x2321, "nvl", "H100L"),)),
        _seven_slice_gpu("H200-141GB", "NVIDIA H200 141GB", _sizes(18, 35, 71, 141),
                         ("H200", "H200X"), (0x2335, 0x233B), 512, (141, 70, 35, 28, 17, 8),
                         assumed=True, aliases=("H200",)),
    )
}


def _norm(text: str) -> str:
    return re.sub(r"[\s_]", "-", text.strip().upper())


def gpu_model(name: str) -> GpuModel:
    """Look up a GPU model by key, alias or board code (case-insensitive)."""
    wanted = _norm(name)
    for model in GPU_MODELS.values():
        if wanted in {_norm(model.key), *(_norm(a) for a in model.aliases),
                      *(_norm(b) for b in model.board_codes)}:
            return model
    raise KeyError(name)


def gpu_model_names() -> list[str]:
    return list(GPU_MODELS)


def canonical_gpu_key(name: str) -> str:
    """The catalogue key for a GPU name; ValueError naming the valid ones otherwise."""
    try:
        return gpu_model(name).key
    except KeyError:
        raise ValueError(f"'{name}' is not a known GPU model; valid: "
                         f"{', '.join(gpu_model_names())}") from None


def gpu_model_for_pci(device_id: int) -> GpuModel | None:
    for model in GPU_MODELS.values():
        if device_id in model.pci_device_ids:
            return model
    return None


def board_for_pci(device_id: int) -> str | None:
    """The vGPU board code of the GPU with this PCI device id: its variant's where known,
    the model's default board otherwise, None for a device vgpu does not know."""
    model = gpu_model_for_pci(device_id)
    return model.board_for_pci(device_id) if model else None


# --- parsing the many spellings of a profile --------------------------------------------

_MIG_NAME = re.compile(r"^(?:MIG[\s-]+)?(\d)g\.(\d+)gb(\+me)?$", re.IGNORECASE)
_VGPU_TYPE = re.compile(
    r"^(?:(?:grid|nvidia)[_-])?(?:(?P<board>[a-z0-9]+)-)?(?P<g>\d)-(?P<gb>\d+)c(?P<me>me)?$",
    re.IGNORECASE,
)
_TIMESLICED = re.compile(r"^(?:(?:grid|nvidia)[_-])?(?:(?P<board>[a-z0-9]+)-)?(?P<gb>\d+)c$",
                         re.IGNORECASE)


class ProfileParseError(ValueError):
    """A profile string names no profile of the given GPU."""


def parse_mig_profile(text: str, gpu: GpuModel) -> MigProfile:
    """Accepts ``1g.10gb``, ``MIG 1g.10gb``, ``A100D-1-10C``, ``grid_a100d-1-10c`` and the
    lab studies' ``nvidia-1-10c``; the board, when named, must be this GPU's."""
    raw = text.strip()
    m = _MIG_NAME.match(raw)
    if m:
        name = f"{m.group(1)}g.{m.group(2)}gb{'+me' if m.group(3) else ''}"
    else:
        v = _VGPU_TYPE.match(raw)
        if not v:
            raise ProfileParseError(_not_a_profile(raw, gpu))
        board = v.group("board")
        if board and board.upper() not in gpu.board_codes and board.lower() != "nvidia":
            raise ProfileParseError(
                f"'{raw}' names board {board.upper()}, but the GPU is {gpu.key} "
                f"(boards {', '.join(gpu.board_codes)}); valid: {', '.join(gpu.profile_names())}"
            )
        name = f"{v.group('g')}g.{v.group('gb')}gb{'+me' if v.group('me') else ''}"
    try:
        return gpu.profile(name)
    except KeyError:
        raise ProfileParseError(_not_a_profile(raw, gpu)) from None


def _not_a_profile(raw: str, gpu: GpuModel) -> str:
    return f"'{raw}' is not a MIG profile of {gpu.key}; valid: {', '.join(gpu.profile_names())}"


def parse_timesliced_type(text: str, gpu: GpuModel) -> str:
    """Normalise a time-sliced vGPU type (``A100D-20C``, ``grid_a100d-20c``, ``20c``) to
    NVIDIA's spelling with this GPU's board code."""
    m = _TIMESLICED.match(text.strip())
    valid = ", ".join(gpu.timesliced_types())
    if not m:
        raise ProfileParseError(f"'{text}' is not a time-sliced vGPU type of {gpu.key}; "
                                f"valid: {valid}")
    board = (m.group("board") or gpu.board).upper()
    gb = int(m.group("gb"))
    if board not in gpu.board_codes or gb not in gpu.timesliced_sizes_gb:
        raise ProfileParseError(f"'{text}' is not a time-sliced vGPU type of {gpu.key}; "
                                f"valid: {valid}")
    return f"{board}-{gb}C"

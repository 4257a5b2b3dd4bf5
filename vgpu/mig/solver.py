"""MIG placement solver. Pure: no I/O, no NVML.

An instance occupies ``memory_slices`` consecutive memory slices from one of its profile's
allowed start positions; instances may not overlap, and each profile has its maximum count
per GPU (the geometry is the catalogue's, ``vgpu.mig.catalogue``).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from vgpu.mig.catalogue import GPU_MODELS, GpuModel, MigProfile


@dataclass(frozen=True)
class MigPlacement:
    """One instance placed on one GPU: occupies memory slices [start, start+size)."""

    profile: MigProfile
    start: int
    gpu: int = 0
    owner: str | None = None

    @property
    def end(self) -> int:
        return self.start + self.profile.memory_slices

    def overlaps(self, other: MigPlacement) -> bool:
        return self.gpu == other.gpu and self.start < other.end and other.start < self.end


@dataclass(frozen=True)
class Suggestion:
    description: str
    profiles: tuple[str, ...]


@dataclass
class PlacementResult:
    """Either ``placements`` (one per requested instance, in request order) or ``reason``."""

    gpu: GpuModel
    requested: list[MigProfile]
    placements: list[MigPlacement] | None = None
    reason: str | None = None
    suggestions: list[Suggestion] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.placements is not None


def _fits(profile: MigProfile, start: int, taken: Sequence[MigPlacement], gpu_index: int) -> bool:
    candidate = MigPlacement(profile, start, gpu_index)
    return not any(candidate.overlaps(t) for t in taken)


def _counts_ok(profiles: Iterable[MigProfile]) -> bool:
    counts = Counter(p.name for p in profiles)
    by_name = {p.name: p for p in profiles}
    return all(counts[n] <= by_name[n].shape.max_count for n in counts)


def _search(
    order: list[int], profiles: list[MigProfile], taken: list[MigPlacement],
    num_gpus: int, assigned: dict[int, MigPlacement],
    floor: tuple[int, int] = (0, -1),
) -> dict[int, MigPlacement] | None:
    """Depth-first placement of ``order``. ``floor``: the (gpu, start) of the previous
    instance when it is the same profile as this one; identical instances are
    interchangeable, so placing them in increasing position only is enough (without this
    a full host is proven full by trying every permutation of its instances)."""
    if not order:
        return assigned
    idx, rest = order[0], order[1:]
    profile = profiles[idx]
    same_next = bool(rest) and profiles[rest[0]].name == profile.name
    tried_empty_gpu = False
    for gpu_index in range(floor[0], num_gpus):
        on_gpu = [t for t in taken if t.gpu == gpu_index]
        if not on_gpu:
            # Identical empty GPUs are interchangeable: trying one is enough.
            if tried_empty_gpu:
                continue
            tried_empty_gpu = True
        if sum(t.profile.compute_slices for t in on_gpu) + profile.compute_slices > \
                _compute_capacity(profile):
            continue
        if not _counts_ok([*(t.profile for t in on_gpu), profile]):
            continue
        for start in profile.shape.starts:
            if (gpu_index, start) <= floor or not _fits(profile, start, taken, gpu_index):
                continue
            placement = MigPlacement(profile, start, gpu_index)
            found = _search(rest, profiles, [*taken, placement], num_gpus,
                            {**assigned, idx: placement},
                            (gpu_index, start) if same_next else (0, -1))
            if found is not None:
                return found
    return None


def _totals_fit(gpu: GpuModel, profiles: Sequence[MigProfile], num_gpus: int,
                occupied: Sequence[MigPlacement]) -> bool:
    """The counting rules every placement must meet (per-profile maximum, compute and
    memory slices): cheap, and enough to reject a full set without searching."""
    every = [*profiles, *(o.profile for o in occupied)]
    counts = Counter(p.name for p in every)
    if any(counts[p.name] > p.shape.max_count * num_gpus for p in every):
        return False
    return (sum(p.compute_slices for p in every) <= gpu.compute_slices * num_gpus
            and sum(p.memory_slices for p in every) <= gpu.memory_slices * num_gpus)


def _place(gpu: GpuModel, profiles: Sequence[MigProfile], num_gpus: int,
           occupied: Sequence[MigPlacement]) -> dict[int, MigPlacement] | None:
    """Largest instances first, identical ones next to each other, at the lowest free
    start, so layouts fill the GPU left to right; exhaustive up to the symmetries."""
    requested = list(profiles)
    if not _totals_fit(gpu, requested, num_gpus, occupied):
        return None
    order = sorted(range(len(requested)),
                   key=lambda i: (-requested[i].memory_slices, -requested[i].compute_slices,
                                  requested[i].name, i))
    return _search(order, requested, list(occupied), num_gpus, {})


def _compute_capacity(profile: MigProfile) -> int:
    return GPU_MODELS[profile.gpu].compute_slices


def solve(
    gpu: GpuModel, profiles: Sequence[MigProfile], *, num_gpus: int = 1,
    occupied: Sequence[MigPlacement] = (),
) -> PlacementResult:
    """Place ``profiles`` on ``num_gpus`` GPUs of model ``gpu`` around ``occupied``
    instances (held by others). Largest instances are placed first, at the lowest free
    start, so layouts fill the GPU left to right; the search backtracks, so it is
    exhaustive: if any valid placement exists it is found."""
    requested = list(profiles)
    found = _place(gpu, requested, num_gpus, occupied)
    if found is not None:
        return PlacementResult(gpu, requested, placements=[found[i] for i in
                                                           range(len(requested))])
    reason = explain_failure(gpu, requested, num_gpus=num_gpus, occupied=occupied)
    return PlacementResult(gpu, requested, reason=reason,
                           suggestions=suggest(gpu, requested, num_gpus=num_gpus,
                                               occupied=occupied))


def place(gpu: GpuModel, profiles: Sequence[MigProfile], *, num_gpus: int = 1,
          occupied: Sequence[MigPlacement] = ()) -> list[MigPlacement] | None:
    """The placements of :func:`solve` (in request order), or None, without the
    explanation and suggestions a failure gets there (for callers that only try)."""
    found = _place(gpu, profiles, num_gpus, occupied)
    return None if found is None else [found[i] for i in range(len(profiles))]


def is_placeable(gpu: GpuModel, profiles: Sequence[MigProfile], *, num_gpus: int = 1,
                 occupied: Sequence[MigPlacement] = ()) -> bool:
    return _place(gpu, profiles, num_gpus, occupied) is not None


def explain_failure(gpu: GpuModel, profiles: Sequence[MigProfile], *, num_gpus: int = 1,
                    occupied: Sequence[MigPlacement] = ()) -> str:
    """The most basic rule the request breaks, in words a lab engineer can act on."""
    names = " + ".join(p.name for p in profiles)
    held = list(occupied)
    counts = Counter(p.name for p in [*profiles, *(o.profile for o in held)])
    for name, count in counts.items():
        limit = gpu.profile(name).shape.max_count * num_gpus
        if count > limit:
            return (f"{count} x {name} exceeds the profile's maximum of {limit} "
                    f"on {_gpus(num_gpus, gpu)}")
    compute = sum(p.compute_slices for p in profiles) + sum(o.profile.compute_slices
                                                            for o in held)
    if compute > gpu.compute_slices * num_gpus:
        extra = f" (of which {sum(o.profile.compute_slices for o in held)} already held)" \
            if held else ""
        return (f"{names} needs {compute} compute slices{extra}; "
                f"{_gpus(num_gpus, gpu)} {'has' if num_gpus == 1 else 'have'} "
                f"{gpu.compute_slices * num_gpus}")
    memory = sum(p.memory_slices for p in profiles) + sum(o.profile.memory_slices for o in held)
    if memory > gpu.memory_slices * num_gpus:
        return (f"{names} needs {memory} memory slices; {_gpus(num_gpus, gpu)} "
                f"{'has' if num_gpus == 1 else 'have'} {gpu.memory_slices * num_gpus}")
    # Totals fit: the failure is fragmentation. Name the first instance that finds no start.
    order = sorted(profiles, key=lambda p: -p.memory_slices)
    for k in range(1, len(order) + 1):
        if not is_placeable(gpu, order[:k], num_gpus=num_gpus, occupied=occupied):
            before = " + ".join(p.name for p in order[: k - 1]) or "nothing"
            where = ", ".join(f"{o.profile.name}@{o.start}" for o in held)
            held_txt = f" beside the held instances {where}" if held else ""
            return (f"no start position left for {order[k - 1].name} (allowed starts "
                    f"{list(order[k - 1].shape.starts)}) after placing {before}{held_txt}")
    return f"{names} cannot be placed on {_gpus(num_gpus, gpu)}"  # pragma: no cover


def _gpus(n: int, gpu: GpuModel) -> str:
    return f"one {gpu.key}" if n == 1 else f"{n} x {gpu.key}"


def _smaller(gpu: GpuModel, profile: MigProfile) -> MigProfile | None:
    candidates = [p for p in gpu.profiles
                  if not p.shape.media_extensions
                  and (p.compute_slices, p.memory_slices) < (profile.compute_slices,
                                                              profile.memory_slices)
                  and p.compute_slices <= profile.compute_slices
                  and p.memory_slices <= profile.memory_slices]
    return max(candidates, key=lambda p: (p.compute_slices, p.memory_slices), default=None)


def suggest(gpu: GpuModel, profiles: Sequence[MigProfile], *, num_gpus: int = 1,
            occupied: Sequence[MigPlacement] = (), limit: int = 4) -> list[Suggestion]:
    """Nearest valid layouts: drop one instance, or shrink one to the next smaller profile."""
    out: list[Suggestion] = []
    seen: set[tuple[str, ...]] = set()
    for i, p in enumerate(profiles):
        dropped = [q for j, q in enumerate(profiles) if j != i]
        key = tuple(sorted(q.name for q in dropped))
        if dropped and key not in seen and is_placeable(gpu, dropped, num_gpus=num_gpus,
                                                        occupied=occupied):
            seen.add(key)
            out.append(Suggestion(f"drop {p.name}", tuple(q.name for q in dropped)))
    for i, p in enumerate(profiles):
        small = _smaller(gpu, p)
        if small is None:
            continue
        shrunk = [small if j == i else q for j, q in enumerate(profiles)]
        key = tuple(sorted(q.name for q in shrunk))
        if key not in seen and is_placeable(gpu, shrunk, num_gpus=num_gpus, occupied=occupied):
            seen.add(key)
            out.append(Suggestion(f"shrink {p.name} to {small.name}",
                                  tuple(q.name for q in shrunk)))
    out.sort(key=lambda s: (-sum(gpu.profile(n).compute_slices for n in s.profiles),
                            s.description))
    return out[:limit]


def enumerate_layouts(gpu: GpuModel) -> list[tuple[str, ...]]:
    """Every distinct multiset of profiles that fits on one GPU (used by docs and tests)."""
    result: set[tuple[str, ...]] = set()
    plain = list(gpu.profiles)

    def grow(current: list[MigProfile], start_at: int) -> None:
        result.add(tuple(sorted(p.name for p in current)))
        for k in range(start_at, len(plain)):
            cand = [*current, plain[k]]
            if is_placeable(gpu, cand):
                grow(cand, k)

    grow([], 0)
    result.discard(())
    return sorted(result)


def all_start_combinations(profiles: Sequence[MigProfile]) -> Iterable[tuple[int, ...]]:
    return itertools.product(*(p.shape.starts for p in profiles))



"""What a capacity-at-the-SLO workload will spend, said before it starts, and where each
block's searches start. A search per instance in every run, at most ``runs`` runs of
``max(min_queries, rate x duration_s)`` queries each. Its blocks are sequential like the
Offline workloads' (vgpu.results.verdict.sequential): a pilot of ``PILOT_BLOCKS`` (at least 3
repeats, complete ABBA pairs), looks fixed from the pilot to ``CAPACITY_MAX_BLOCKS``
before the first run, stopping as soon as the verdict is decided.

A search that ends: after a side's warm-up and after every block, the next searches of an
instance position start at ``WARM_START`` of the lower capacity the two sides just found
there, so their first two runs bracket the capacity within a factor of 2 (a
VALID start, then twice it; or an INVALID one, then half) whenever it moved less than that,
and the rest of the budget bisects: ``runs_to_resolution`` runs reach the stated
resolution. The start stays below both knees, so the latency checks find a load both
searches ran there (vgpu.results.verdict.capacity_checks.shared_load)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from vgpu.bench.workload import EffectiveWorkload
from vgpu.results.verdict.capacity_system import knee

# per run beyond its arrivals: the last answers and the next run's connections (measured
# on this project's 2-core machine: 2 s runs took 2.5-3.5 s)
RUN_OVERHEAD_S = 1.0
# per harness run: start, warm-up answers, the accuracy gate, the synchronised start
HARNESS_S = 6.0
# the pilot: 2 ABBA pairs, so at least 3 repeats (a capacity verdict's t interval on 2 df)
PILOT_BLOCKS = 4
# a block costs two searches per instance (about 36 s each as scenario 6 runs them on 2
# cores). 12: an A/A PASSes 97% of the time within it at a block noise of 2% per side,
# its PASS holding with the allowance for unseen disturbed runs (1.0% at 12 clean blocks,
# 1.9% at 6, where an A/A PASSed half the time); benchmarks/llm_capacity_power.py.
# --max-repeats lowers or raises it
CAPACITY_MAX_BLOCKS = 12
# the next search starts at this share of the capacity just found: below the knee, and
# its double above it unless the capacity rose by half
WARM_START = 0.75
BRACKET_RUNS = 2  # a VALID start and its double, or an INVALID start and its half


def bisections(resolution: float, factor: float = 2.0) -> int:
    """The bisections that narrow a bracket of ``factor`` to ``resolution`` (a fraction)."""
    if resolution <= 0:
        raise ValueError(f"capacity.resolution {resolution}: must be above 0")
    return max(0, math.ceil(math.log2(math.log(factor) / math.log1p(resolution)) - 1e-12))


def runs_to_resolution(resolution: float) -> int:
    """The runs a warm-started search needs to bracket, bisect to ``resolution`` and rerun
    its final point (loadgen.llm.capacity.find_capacity)."""
    return BRACKET_RUNS + bisections(resolution) + 1


def search_seconds(workload: EffectiveWorkload) -> float:
    """The most one search takes when every run's arrivals last ``duration_s`` (a run
    at a rate below min_queries / duration_s lasts longer)."""
    assert workload.llm is not None and workload.llm.capacity is not None
    capacity = workload.llm.capacity
    return capacity.runs * (capacity.duration_s + RUN_OVERHEAD_S)


def found_capacity(search: Mapping[str, Any] | None) -> float:
    """Where a harness record's search (its capacity section) put the capacity
    (queries/s; 0 when it found none): vgpu.results.verdict.capacity_system.knee."""
    if not search or not isinstance(search.get("capacity_qps"), int | float):
        return 0.0
    return max(0.0, knee(search))


def warm_starts(sides: Sequence[Sequence[tuple[str, Mapping[str, Any] | None]]]) \
        -> dict[str, float]:
    """Instance name -> the rate its next search starts at: ``WARM_START`` of the lower
    capacity its position's searches found over ``sides`` (each side's (instance, capacity
    section of its record) in position order); a position where a side found none is left
    out (its search starts at the spec's start_qps)."""
    starts: dict[str, float] = {}
    for position in zip(*sides, strict=False):
        found = [found_capacity(search) for _, search in position]
        if found and min(found) > 0:
            for name, _ in position:
                starts[name] = round(WARM_START * min(found), 3)
    return starts


def resolution_note(workload: EffectiveWorkload) -> str:
    """Whether the runs budget reaches the stated resolution from a warm start, and what
    would if it does not."""
    assert workload.llm is not None and workload.llm.capacity is not None
    capacity = workload.llm.capacity
    needed = runs_to_resolution(capacity.resolution)
    if capacity.runs >= needed:
        return (f"{capacity.runs} runs reach the {capacity.resolution * 100:g}% bracket from "
                f"a warm start ({needed} needed: {BRACKET_RUNS} bracket, "
                f"{bisections(capacity.resolution)} bisect, 1 reruns)")
    reached = 2 ** (1 / 2 ** max(0, capacity.runs - BRACKET_RUNS - 1)) - 1
    return (f"{capacity.runs} runs bracket to about {reached * 100:.1f}%, not the stated "
            f"{capacity.resolution * 100:g}%: capacity.runs {needed} would reach it")


def plan_note(workload: EffectiveWorkload, schedule: Sequence[int], sides: int = 2) -> str:
    """The budget, the looks and the expected time at the pilot and at the cap (the
    unjudged warm-up run of each side included)."""
    assert workload.llm is not None and workload.llm.capacity is not None
    capacity = workload.llm.capacity
    per_run = search_seconds(workload) + HARNESS_S

    def minutes(blocks: int) -> float:
        return (blocks + 1) * sides * per_run / 60

    first, last = schedule[0], schedule[-1]
    looks = ", ".join(map(str, schedule))
    blocks = (f"{first} blocks, fixed" if len(schedule) == 1 else
              f"sequential blocks, looks at {looks} (fixed before the first run), stopping "
              f"as soon as the verdict is decided")
    return (f"capacity at the SLO: {blocks}; each run a search per instance of at most "
            f"{capacity.runs} runs of max({capacity.min_queries}, rate x "
            f"{capacity.duration_s:g} s) queries, the warm-up's from "
            f"{capacity.start_qps:g}/s, every block's from {WARM_START:g} x the capacity "
            f"just found; {resolution_note(workload)}; about {minutes(first):.1f} min for "
            f"{first} blocks" + ("" if last == first else
                                  f", {minutes(last):.1f} min at the cap of {last}")
            + " (warm-ups included)")

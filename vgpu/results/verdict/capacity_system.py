"""Where an LLM capacity verdict is meaningful. Per instance when each instance owns its
compute (a MIG instance, a whole GPU): its capacity is its slice's. As a system when the
instances share it (a CPU, time-sliced vGPU profiles, several instances on one device):
each instance's capacity is its share of whatever the others left it at that moment
(three instances on two shared cores varied by a third between repeats while their sum
agreed within about 3%), so the verdict is the system's capacity, the sum of the
instances' capacities at the common SLO per repeat, and the per-instance figures are
shown, not judged. The choice comes from the devices the runs used and the scenario's
plan, never a flag; the check's reason says which and why."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vgpu.results.store.series import SeriesData
from vgpu.results.verdict.capacity import (
    Bracket,
    CapacityCheck,
    LlmVerdict,
    bracket_interval,
    search_bracket,
)

SYSTEM_LABEL = "system"


@dataclass(frozen=True)
class Sharing:
    shared: bool
    why: str


def _timesliced(series: SeriesData) -> bool:
    """Whether the series' scenario plans time-sliced vGPU profiles (slices that share
    the GPU's engines); False when the scenario cannot be loaded."""
    from vgpu import catalog, mig
    from vgpu.model.vgpu_request import parse_vgpu

    try:
        scenario = catalog.load(series.scenario_id)
        gpu = mig.gpu_model(scenario.gpu)
        return any(parse_vgpu(v, gpu).kind == "timesliced"
                   for vm in scenario.vms for v in vm.vgpus)
    except Exception:
        return False


def sharing(*sides: SeriesData) -> Sharing:
    """Per instance or as a system (the module), from every side's devices and plan."""
    for series in sides:
        run_id = series.valid_run_ids[0] if series.valid_run_ids else None
        if run_id is None:
            continue
        results = [inst.result for inst in series.instances[run_id]]
        if len(results) < 2:
            continue
        if any(r.device_kind == "cpu" for r in results):
            return Sharing(True, f"the {len(results)} instances of {series.label} share "
                           "this machine's CPU cores")
        devices = [r.mig_uuid or r.device_note or r.device_name for r in results]
        if len(set(devices)) < len(devices):
            return Sharing(True, f"instances of {series.label} share one device")
        if _timesliced(series):
            return Sharing(True, f"{series.label} plans time-sliced vGPU profiles, which "
                           "share the GPU's engines")
    return Sharing(False, "each instance owns its compute (a MIG instance or a whole GPU)")


def confirmed(search: Mapping[str, Any]) -> float:
    """The highest rate VALID every time the search ran it."""
    return float(search.get("confirmed_capacity_qps", search["capacity_qps"]))


def knee(search: Mapping[str, Any]) -> float:
    """Where the search puts the capacity: its final point (its highest VALID rate) when
    its runs there were VALID at least half the time, else its confirmed capacity. The
    knee is the rate at which a run is VALID half the time, so a final point VALID once
    and INVALID on its rerun is at the knee; taking the confirmed rate below it instead
    would move a random side's capacity down by a bisection step or more (by up to the
    first bracket's half when only the start was VALID every time), which decides nothing
    and widens every interval. Both sides are read alike, so the ratio is not biased."""
    final = float(search.get("capacity_qps") or 0)
    there = [r for r in search.get("runs", [])
             if math.isclose(float(r["rate"]), final, rel_tol=1e-9)]
    if final > 0 and 2 * sum(bool(r["valid"]) for r in there) >= len(there):
        return final
    return confirmed(search)


def system_bracket(searches: Sequence[Mapping[str, Any]]) -> Bracket:
    """A repeat's system capacity: the sum of its instances' brackets (each from its
    knee to the lowest INVALID rate above it)."""
    brackets = [search_bracket({**s, "capacity_qps": knee(s)}) for s in searches]
    return Bracket(sum(b.low for b in brackets), sum(b.high for b in brackets))


def system_verdict(vm: Sequence[Sequence[Mapping[str, Any]]],
                   bare: Sequence[Sequence[Mapping[str, Any]]], allowed_pct: float,
                   shown: Sequence[str], why: str) -> tuple[CapacityCheck, LlmVerdict]:
    """The system's capacity check from paired repeats (``vm[i]``: repeat i's searches,
    one per instance); ``shown``: the per-instance figures stated beside it."""
    interval = bracket_interval([system_bracket(r) for r in vm],
                                [system_bracket(r) for r in bare])
    outcome = interval.verdict(1 - allowed_pct / 100)
    sums = ", ".join(f"{sum(knee(s) for s in v):.1f}/{sum(knee(s) for s in b):.1f}"
                     for v, b in zip(vm, bare, strict=True))
    detail = (f"judged as a system: {why}, so each instance's capacity is its share of "
              f"the rest's load; the sum at the common SLO VM/bare metal "
              f"{interval.ratio:.3f} [{interval.low:.3f}, {interval.high:.3f}] over "
              f"{interval.repeats} repeats ({interval.spread}; the brackets "
              f"+/-{interval.resolution_pct:.1f}%), allowed -{allowed_pct:g}%; sums per repeat "
              f"VM/bare metal {sums}; per instance, shown and not judged: "
              + "; ".join(shown))
    check = CapacityCheck(f"capacity_at_slo {SYSTEM_LABEL}", outcome == "PASS", detail,
                          outcome)
    return check, LlmVerdict(interval, [check])


def ratio_text(vm: Sequence[Mapping[str, Any]], bare: Sequence[Mapping[str, Any]]) -> str:
    """An instance's capacity ratio over the repeats, for the record (geometric mean)."""
    ratios = [knee(v) / knee(b) for v, b in zip(vm, bare, strict=True)
              if knee(b) > 0 and knee(v) > 0]
    if not ratios:
        return "no capacity on a side"
    mean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    return f"{mean:.3f} (" + ", ".join(f"{r:.2f}" for r in ratios) + ")"

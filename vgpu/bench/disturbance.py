"""What else used each target's machine during a run, from the harness records' host load
(loadgen/telemetry.py): instances on one machine see each other's CPU as "other", so the
other instances' own CPU is taken off before the share is stored as a run metric."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from vgpu.bench.fanout import InstanceOutcome
from vgpu.results.store.disturbance import (
    CPU_STEAL,
    GPU_OTHER_PROCESS,
    GPU_OTHERS,
    GPU_THROTTLED,
    OTHER_CPU,
)
from vgpu.results.store.records import Metric

# NVML clock-throttle reasons that say the hardware held the clocks down: HW slowdown
# (0x8), HW thermal slowdown (0x40), HW power brake (0x80). Not idle (0x1), application
# clocks (0x2), the software power cap (0x4), sync boost (0x10) or software thermal (0x20):
# a GPU at full load, or slices sharing one power budget, show those normally.
HW_SLOWDOWN, HW_THERMAL, HW_POWER_BRAKE = 0x8, 0x40, 0x80
DISTURBING_THROTTLE = HW_SLOWDOWN | HW_THERMAL | HW_POWER_BRAKE
COMMAND_CHARS = 80  # of a disturbing process's command, in its metric's unit


def _machine(outcome: InstanceOutcome) -> str:
    target = outcome.target
    return "local" if target.is_local else f"transport-{id(target.transport)}"


def _telemetry(outcome: InstanceOutcome) -> Mapping[str, Any]:
    return outcome.result.telemetry or {}


def other_cpu_share(loads: Sequence[dict[str, Any]]) -> float:
    """The largest share of one machine's CPU (0-1) used by processes other than the
    harness instances whose host loads are ``loads`` (all from that machine)."""
    owns = [load["own_cpu_s"] for load in loads]
    shares = [max(0.0, load["busy_cpu_s"] - sum(owns)) / (load["wall_s"] * load["cpus"])
              for load in loads if load["wall_s"] > 0]
    return max(shares, default=0.0)


def disturbance_metrics(outcomes: Sequence[InstanceOutcome]) -> list[Metric]:
    """Run-level metrics of what else used the machines: other processes' CPU share and
    CPU steal (percent, the worst machine), other processes on a GPU and throttled GPU
    clocks (where NVML answered)."""
    loads: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for outcome in outcomes:
        load = (_telemetry(outcome).get("host") or {}).get("load") or {}
        if load.get("available"):
            loads[_machine(outcome)].append(load)
    metrics: list[Metric] = []
    if loads:
        metrics.append(Metric(OTHER_CPU, 100.0 * max(other_cpu_share(v)
                                                     for v in loads.values()), "%"))
        metrics.append(Metric(CPU_STEAL, 100.0 * max(load["steal_share"] for v in
                                                     loads.values() for load in v), "%"))
    gpus = [(_telemetry(o).get("gpu") or {}).get("metrics") or {} for o in outcomes]
    siblings = _sibling_pids(outcomes)
    others = [max(0.0, g["other_processes"]["max"] - len(_seen(o, siblings[i], True)))
              for i, (o, g) in enumerate(zip(outcomes, gpus, strict=True))
              if (g.get("other_processes") or {}).get("max") is not None]
    if others:
        metrics.append(Metric(GPU_OTHERS, max(others), "processes"))
    metrics += other_process_metrics(outcomes, siblings)
    reasons = [int(g["clocks_throttle_reasons"]["max"]) for g in gpus
               if (g.get("clocks_throttle_reasons") or {}).get("max") is not None]
    if reasons:
        throttled = any(r & DISTURBING_THROTTLE for r in reasons)
        metrics.append(Metric(GPU_THROTTLED, 1.0 if throttled else 0.0, "flag"))
    return metrics


def _sibling_pids(outcomes: Sequence[InstanceOutcome]) -> list[set[int]]:
    """For each instance, the PIDs of the other harness instances on its machine: they are
    the run, not a disturbance, when they share a GPU with it."""
    by_machine: dict[str, set[int]] = defaultdict(set)
    own: list[int | None] = []
    for outcome in outcomes:
        pid = (_telemetry(outcome).get("host") or {}).get("pid")
        own.append(pid)
        if pid is not None:
            by_machine[_machine(outcome)].add(int(pid))
    return [by_machine[_machine(o)] - {pid} for o, pid in zip(outcomes, own, strict=True)]


def _seen(outcome: InstanceOutcome, siblings: set[int], of_siblings: bool
          ) -> list[dict[str, Any]]:
    """The processes the instance saw using its device: those that are sibling instances,
    or those that are not."""
    seen = ((_telemetry(outcome).get("gpu") or {}).get("other_processes") or {}).get(
        "seen") or []
    return [p for p in seen if (int(p["pid"]) in siblings) == of_siblings]


def other_process_metrics(outcomes: Sequence[InstanceOutcome],
                          siblings: list[set[int]] | None = None) -> list[Metric]:
    """One instance metric per process that disturbed an instance's device: its PID as the
    value, its command as the unit, so that a disturbed run names what ran beside it."""
    siblings = siblings if siblings is not None else _sibling_pids(outcomes)
    metrics = []
    for outcome, theirs in zip(outcomes, siblings, strict=True):
        for process in _seen(outcome, theirs, False):
            metrics.append(Metric(GPU_OTHER_PROCESS, float(process["pid"]),
                                  str(process["command"])[:COMMAND_CHARS],
                                  outcome.target.instance))
    return metrics

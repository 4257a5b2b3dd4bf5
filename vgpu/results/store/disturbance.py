"""A busy machine is seen, not judged (pure): the run metrics that say what else used a
target's machine while a run was timed, the stated limits beyond which a run counts as
disturbed, and the sentence that says so. A disturbed run stays in its series' numbers,
shown and marked (vgpu.results.store.series), and a comparison with it can neither PASS nor
FAIL: INCONCLUSIVE, naming the run and the load (vgpu.results.verdict.compare.Comparison). In
an interleaved session the disturbed block is set aside and run again instead, a bounded
number of times (vgpu.bench.setaside)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import NamedTuple

from vgpu.results.store.records import Metric

# percent of the machine's CPU (all cores over the timed span) used by processes other than
# the run's harness instances: /proc/stat's busy time less the instances' own CPU time
OTHER_CPU = "other_cpu_share"
CPU_STEAL = "cpu_steal_share"  # percent of the machine's CPU the hypervisor stole
# most processes seen at once on an instance's device that used it (memory or SM share above
# the harness's floors: loadgen/telemetry.py), not the harness itself nor its own server
GPU_OTHERS = "gpu_other_processes"
# one per such process and instance: its PID, its command as the unit
GPU_OTHER_PROCESS = "gpu_other_process_pid"
GPU_THROTTLED = "gpu_clocks_throttled"  # 1: clocks held down by HW slowdown, heat, power brake
DISTURBANCE_METRICS = frozenset({OTHER_CPU, CPU_STEAL, GPU_OTHERS, GPU_OTHER_PROCESS,
                                 GPU_THROTTLED})

# Beyond these a run is disturbed. 15% of the machine is, on the 2-core machine the
# defaults were measured on, 0.3 of a core: more than the repeat noise (1.2%) can hide.
LIMITS = {OTHER_CPU: 15.0, CPU_STEAL: 5.0, GPU_OTHERS: 0.0, GPU_THROTTLED: 0.0}
# Set (to anything but "" or "0") on a machine shared on purpose, such as a test suite's
# host: the metrics are still recorded and shown, and no run counts as disturbed.
IGNORE_ENV = "VGPU_IGNORE_DISTURBANCE"


class Disturbance(NamedTuple):
    run_id: int
    reasons: list[str]

    def describe(self) -> str:
        return f"disturbed: {'; '.join(self.reasons)} during run {self.run_id}"


def _reason(name: str, value: float, processes: list[Metric]) -> str:
    if name == OTHER_CPU:
        return f"other processes used {value:.0f}% of the CPU"
    if name == CPU_STEAL:
        return f"the hypervisor stole {value:.0f}% of the CPU"
    if name == GPU_OTHERS:
        named = "; ".join(f"pid {p.value:.0f} ({p.unit}) on {p.instance}'s device"
                          for p in processes)
        return f"{value:.0f} other process(es) ran on the GPU" + (f": {named}" if named else "")
    return "the GPU's clocks were held down by the hardware (slowdown, thermal or power brake)"


def ignored() -> bool:
    return os.environ.get(IGNORE_ENV, "") not in ("", "0")


def disturbance(run_id: int, metrics: Iterable[Metric]) -> Disturbance | None:
    """The run's disturbance when a run-level metric is beyond its limit, else None
    (always None while $VGPU_IGNORE_DISTURBANCE is set)."""
    if ignored():
        return None
    metrics = list(metrics)
    processes = [m for m in metrics if m.name == GPU_OTHER_PROCESS]
    reasons = [_reason(m.name, m.value, processes) for m in metrics
               if m.instance is None and m.name in LIMITS and m.value > LIMITS[m.name]]
    return Disturbance(run_id, reasons) if reasons else None

"""Offline expected QPS by probing. LoadGen's Offline test issues one query of
expected_qps x min_duration x 1.1 samples; with an expected QPS far below the real rate
the run ends early and is INVALID, far above it the run lasts much longer than asked.
When a workload gives no target_qps, short probe rounds (all instances together, as in
the real run) measure each instance's rate, growing the sample count until a probe lasts
at least PROBE_MIN_S."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from loadgen.contract import RunResult
from vgpu.bench.fanout import RoundListener, RoundTimeouts, run_round
from vgpu.bench.runlength import MIN_WINDOW_POINTS, PROBE_WINDOWS
from vgpu.bench.workload import EffectiveWorkload, harness_spec
from vgpu.errors import RemoteError
from vgpu.targets.target import Target

PROBE_MIN_S = 1.0
PROBE_TARGET_S = 2.0
MAX_PROBES = 4
# Set the expected QPS above the probed rate: a run that finishes early is INVALID, one
# that runs a little long is not. A short probe under-reads a shared CPU by 20-40% (thread
# pools and caches still warming), so 1.2 left many runs INVALID.
HEADROOM = 1.5
# On a GPU the probe reads the rate to a few percent once warmed up (the harness's warm-up
# queries run before it): a little headroom keeps the run valid without making it last
# half as long again; the first probe is long enough (200 batches) that a second is rarely
# needed, and half a second of it is enough to read a GPU's rate.
GPU_HEADROOM = 1.1
GPU_FIRST_PROBE_BATCHES = 200
GPU_PROBE_MIN_S = 0.5
# batches a probe completes at least when it sizes a GPU's run length: enough points for
# every span of vgpu.bench.runlength's windows, and one to start from
STABILITY_PROBE_BATCHES = MIN_WINDOW_POINTS * PROBE_WINDOWS + 1


@dataclass
class OfflineProbe:
    """Each instance's probed rate, the expected QPS for its timed runs, and the last
    probe's result (its completion timeline sizes a GPU run: vgpu.bench.runlength)."""

    rates: dict[str, float] = field(default_factory=dict)
    expected_qps: dict[str, float] = field(default_factory=dict)
    results: dict[str, RunResult] = field(default_factory=dict)
    probes: int = 0
    headroom: float = HEADROOM


def on_gpu(targets: Sequence[Target]) -> bool:
    return all(t.device.get("kind") in ("gpu", "mig") for t in targets)


def calibrate_offline(
    targets: Sequence[Target],
    workload: EffectiveWorkload,
    probe_dir: Callable[[int, str], Path],
    listener: RoundListener | None = None,
    timeouts: RoundTimeouts = RoundTimeouts(),
    seed: int = 0,
) -> dict[str, float]:
    """Instance name -> expected Offline QPS for the timed runs."""
    return probe_offline(targets, workload, probe_dir, listener, timeouts, seed).expected_qps


def probe_offline(
    targets: Sequence[Target],
    workload: EffectiveWorkload,
    probe_dir: Callable[[int, str], Path],
    listener: RoundListener | None = None,
    timeouts: RoundTimeouts = RoundTimeouts(),
    seed: int = 0,
) -> OfflineProbe:
    """Probe rounds until the shortest instance's probe lasted long enough (sized for a
    GPU where every target is one)."""
    gpu = on_gpu(targets)
    first = max(2 * workload.batch, 64)
    if gpu:
        first = max(first, GPU_FIRST_PROBE_BATCHES * workload.batch)
    min_s = GPU_PROBE_MIN_S if gpu else PROBE_MIN_S
    # a run length sized from the probe's timeline needs enough completions to read
    least = STABILITY_PROBE_BATCHES * workload.batch if workload.sized_by_stability else 0
    samples = {t.instance: max(first, least) for t in targets}
    steady = gpu or workload.simulated_gpu
    probe = OfflineProbe(headroom=GPU_HEADROOM if steady else HEADROOM)
    rates = probe.rates
    for attempt in range(MAX_PROBES):
        specs = {
            t.instance: harness_spec(
                workload, instance=t.instance, device=t.device, threads=t.threads,
                seed=seed, duration_s=0.001, min_query_count=samples[t.instance],
                accuracy=False, stability=False,
            ).to_json()
            for t in targets
        }
        result = run_round(
            targets, specs, {t.instance: probe_dir(attempt, t.instance) for t in targets},
            tag=f"probe-{attempt}", expected_s=PROBE_TARGET_S, listener=listener,
            timeouts=timeouts,
        )
        if result.failure:
            raise RemoteError(f"calibration probe failed: {result.failure}")
        for outcome in result.outcomes:
            rate = outcome.result.throughput
            if not rate:
                raise RemoteError(f"calibration probe of {outcome.target.instance} "
                                  "reported no throughput")
            rates[outcome.target.instance] = float(rate)
            probe.results[outcome.target.instance] = outcome.result
        probe.probes = attempt + 1
        shortest = min(samples[name] / rate for name, rate in rates.items())
        if shortest >= min_s:
            break
        samples = {name: max(least, math.ceil(rate * PROBE_TARGET_S))
                   for name, rate in rates.items()}
    probe.expected_qps = {name: rate * probe.headroom for name, rate in rates.items()}
    return probe

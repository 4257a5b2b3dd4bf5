"""The capacity verdict against reality: twin slice simulators (loopback servers on the
wall clock, this machine's shared cores) searched as `vgpu bench` searches them
(loadgen.llm.capacity.find_capacity over endpoint_run, the budget of
tests/bench/test_llm_capacity_bench.py), repeat by repeat bare metal then VM, judged by
vgpu.results.verdict.capacity_checks with the Holm family. Per trial: each check's verdict; at the
end, how often each candidate came out PASS / INCONCLUSIVE / FAIL, and every search's
capacity against the profile's known one (the virtual clock's, bisected to 0.5%).

    .venv/bin/python benchmarks/llm_capacity_twins.py [--trials 5] [--slower 2]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from dataclasses import replace
from typing import Any

from loadgen.llm.capacity import find_capacity
from loadgen.llm.open_loop import EndpointClient, endpoint_run
from loadgen.llm.runs import Budget, LoadShape, Slo
from loadgen.llm.slice_engine import SliceProfile, simulated_run
from loadgen.llm.slice_sim import SliceSimulator
from vgpu.results.verdict.capacity_checks import instance_checks
from vgpu.results.verdict.compare import holm, overall_verdict

PROFILE = SliceProfile(step_ms=10.0, context_us=12.0)
SLO = Slo(300.0, 20.0)
SHAPE = LoadShape(16, 48, 16)
BUDGET = Budget(runs=8, min_queries=100, duration_s=1.0, resolution=0.025)
FINE = Budget(runs=14, min_queries=100, duration_s=1.0, resolution=0.005)
START_QPS = 40.0
REPEATS = 2


def search(url: str, repeat: int) -> dict[str, Any]:
    client = EndpointClient(url, "sim")
    result = find_capacity(lambda rate, run: endpoint_run(
        client, rate, run, SHAPE, SLO, 0, repeat, BUDGET), START_QPS, BUDGET)
    return {**result.to_json(), "seed": 0, "budget": {"resolution": BUDGET.resolution}}


def known(profile: SliceProfile, repeat: int) -> float:
    return find_capacity(lambda rate, _run: simulated_run(
        profile, rate, SHAPE, SLO, 0, repeat, FINE), START_QPS, FINE).capacity


def trial(vm_profile: SliceProfile) -> tuple[dict[str, str], list[tuple[str, int, float]]]:
    vm, bare = [], []
    with SliceSimulator(PROFILE) as bare_sim, SliceSimulator(vm_profile) as vm_sim:
        for repeat in range(REPEATS):
            bare.append(search(bare_sim.url, repeat))
            vm.append(search(vm_sim.url, repeat))
    checks = holm(instance_checks("", vm, bare, 2.0, 5.0))
    for check in checks:
        print(f"    {check.metric}: {check.verdict} {check.reason[:260]}")
    found = [(side, i, float(s["capacity_qps"])) for side, searches in
             (("bare", bare), ("vm", vm)) for i, s in enumerate(searches)]
    return {c.metric: c.verdict for c in checks} | \
        {"overall": overall_verdict(checks)}, found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--slower", type=int, default=2)
    args = parser.parse_args()
    truth = {r: known(PROFILE, r) for r in range(REPEATS)}
    print(f"known capacity per repeat (virtual clock): {truth}")
    for name, profile, trials in (("identical", PROFILE, args.trials),
                                  ("5% slower", replace(PROFILE, slowdown=1.05),
                                   args.slower)):
        tally: dict[str, Counter[str]] = {}
        errors = []
        for t in range(trials):
            started = time.monotonic()
            print(f"{name} trial {t + 1}/{trials}")
            verdicts, found = trial(profile)
            for metric, verdict in verdicts.items():
                tally.setdefault(metric, Counter())[verdict] += 1
            errors += [(c / truth[i] - 1) * 100 for side, i, c in found
                       if side == "bare" or name == "identical"]
            print(f"  {verdicts['overall']} in {time.monotonic() - started:.0f} s; "
                  f"capacities {[(s, i, round(c, 1)) for s, i, c in found]}")
        print(f"== {name}: " + "; ".join(f"{m} {dict(c)}" for m, c in tally.items()))
        print(f"   searches vs known capacity: {min(errors):+.1f}% .. {max(errors):+.1f}%")


if __name__ == "__main__":
    main()

"""The capacity search's client against the virtual clock, side by side in one run: a
client with one place in flight (concurrency 1) and a free one, both against the loopback
slice simulator on the wall clock, and the same load on the virtual clock with a one-slot
server (loadgen.llm.slice_engine.simulated_run, the known answer). The test
(tests/loadgen/test_open_loop.py) holds the order of these; the sizes are timing and are
measured here, rounds alternating limited and free to share the load conditions.

Per round it prints the limited client's p99 TTFT against the one-slot virtual clock's
(goal: 0.8 to 2.5, the real server adds HTTP and scheduling time to each query, which a
one-slot queue accumulates), the free client's p99 send lag (goal: under 100 ms, its
queries leave on time) and whether the free client's run was VALID (goal: yes, its
TTFT and TPOT within the SLO); the medians at the end.

    .venv/bin/python benchmarks/open_loop_clock.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loadgen.llm.open_loop import EndpointClient, endpoint_run
from loadgen.llm.runs import Budget, LoadShape, Slo
from loadgen.llm.slice_engine import SliceProfile, simulated_run
from loadgen.llm.slice_sim import SliceSimulator

# the test's load: 80 queries/s of 8 tokens on 2 ms steps, 0.5 s and 60 queries at least
PROFILE = SliceProfile(step_ms=2.0)
SHAPE, SLO = LoadShape(output_tokens=8), Slo(ttft_ms=100.0, tpot_ms=20.0)
BUDGET = Budget(min_queries=60, duration_s=0.5)
RATE = 80.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    one_slot = simulated_run(replace(PROFILE, max_num_seqs=1), RATE, SHAPE, SLO, 0, 0, BUDGET)
    assert one_slot.ttft_p99_ms is not None
    print(f"one-slot virtual clock: p99 TTFT {one_slot.ttft_p99_ms:.1f} ms")
    print(f"{'round':<6}{'limited p99 TTFT ms':>21}{'/ virtual':>11}{'free lag p99 ms':>17}"
          f"{'free VALID':>12}")
    ratios, lags, valid = [], [], []
    with SliceSimulator(PROFILE) as sim:
        for number in range(rounds):
            limited = endpoint_run(EndpointClient(sim.url, "sim", concurrency=1), RATE, 0,
                                   SHAPE, SLO, 0, 0, BUDGET)
            free = endpoint_run(EndpointClient(sim.url, "sim"), RATE, 0, SHAPE, SLO, 0, 0,
                                BUDGET)
            assert limited.ttft_p99_ms is not None
            ratios.append(limited.ttft_p99_ms / one_slot.ttft_p99_ms)
            lags.append(float(free.client["send_lag_p99_ms"]))
            valid.append(free.valid)
            print(f"{number:<6}{limited.ttft_p99_ms:>21.1f}{ratios[-1]:>11.2f}"
                  f"{lags[-1]:>17.1f}{'yes' if free.valid else 'no':>12}")
    print(f"median limited/virtual p99 TTFT ratio {statistics.median(ratios):.2f} (goal 0.8-2.5); "
          f"median free send lag p99 {statistics.median(lags):.1f} ms (goal < 100); "
          f"free runs VALID {sum(valid)}/{rounds}")


if __name__ == "__main__":
    main()

"""How steady this machine's CPU is, with nothing of vgpu running: a fixed compute loop
(a float32 matrix product on one thread) counted in equal windows, first in one process,
then in as many processes as the main job runs instances (3 for scenario 6), all at once.
It prints each window's rate, the coefficient of variation, the largest step from one
window to the next, and what that noise means for an interleaved verdict at a tolerance:
two neighbouring windows are what one block compares (a run a side), so give
``--window-s`` the length of one run.

A verdict of no difference at a 2% tolerance needs the block-to-block noise well under
the tolerance: `vgpu bench` prints, at its first look, how many blocks a PASS needs at the
noise it measured. When this script already shows several percent with no harness at all,
the machine, not the harness, sets that number (a hypervisor sharing the cores, a
frequency that moves): run the verdicts on a quieter machine, or calibrate there.

    .venv/bin/python benchmarks/machine_noise.py [--windows 10] [--window-s 2] [--processes 3]
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import statistics
import subprocess
import sys
import time

LOOP = """
import os, sys, time
import numpy as np
a = np.random.default_rng(0).random((200, 200), dtype=np.float32)
start, window, count = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
while time.time() < start:
    time.sleep(0.001)
rates = []
for k in range(count):
    end = start + (k + 1) * window
    done = 0
    while time.time() < end:
        a @ a
        done += 1
    rates.append(done / window)
print(" ".join(f"{r:.1f}" for r in rates))
"""
SINGLE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def windows_of(processes: int, windows: int, window_s: float) -> list[float]:
    """The summed rate of ``processes`` loops started together, window by window."""
    start = time.time() + 1.0 + 0.2 * processes  # every process imported before it
    env = {**os.environ, **SINGLE_THREAD}
    children = [subprocess.Popen([sys.executable, "-c", LOOP, str(start), str(window_s),
                                  str(windows)], stdout=subprocess.PIPE, text=True, env=env)
                for _ in range(processes)]
    per_process = []
    for child in children:
        out, _ = child.communicate()
        values = [float(x) for x in out.split()]
        if child.returncode != 0 or len(values) != windows:
            sys.exit(f"a loop process ended with exit {child.returncode} after "
                     f"{len(values)} of {windows} windows")
        per_process.append(values)
    if time.time() > start + windows * window_s + 5 * window_s:
        print("note: the loops ended late; the machine is too busy to start them together")
    return [sum(column) for column in zip(*per_process, strict=True)]


def describe(label: str, rates: list[float], tolerance_pct: float) -> None:
    mean = statistics.fmean(rates)
    cv = 100 * statistics.stdev(rates) / mean
    steps = [100 * math.log(b / a) for a, b in itertools.pairwise(rates)]
    # With no difference, the log ratio of two neighbouring windows is what one interleaved
    # block (a run a side, one after the other) would measure: its sd is the block noise.
    # Slow drift, which the interleaving cancels, stays out of it; the CV keeps it.
    block_sd = math.sqrt(statistics.fmean(step * step for step in steps))
    # the rule of the job's first look (vgpu.results.verdict.sequential.plan_total) at its
    # normal limit and without its upper bound on the variance: a PASS of no difference,
    # one-sided 2.5%, power 0.8
    blocks = math.ceil(((1.96 + 0.84) * block_sd / tolerance_pct) ** 2)
    print(f"{label}: {' '.join(f'{r:.0f}' for r in rates)}")
    print(f"  mean {mean:.0f}/s, CV {cv:.1f}%, largest step between windows "
          f"{max(abs(x) for x in steps):.1f}%; neighbouring windows differ by "
          f"{block_sd:.1f}% (sd), so a PASS of no difference at {tolerance_pct:g}% needs "
          f"about {blocks} blocks")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows", type=int, default=10)
    parser.add_argument("--window-s", type=float, default=2.0)
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--tolerance-pct", type=float, default=2.0)
    args = parser.parse_args()
    if args.windows < 3 or args.window_s <= 0:
        parser.error("--windows must be 3 or more and --window-s above 0")
    print(f"{os.cpu_count()} CPU(s); {args.windows} windows of {args.window_s:g} s")
    for processes in sorted({1, args.processes}):
        rates = windows_of(processes, args.windows, args.window_s)
        describe(f"{processes} process(es), rates summed", rates, args.tolerance_pct)


if __name__ == "__main__":
    main()

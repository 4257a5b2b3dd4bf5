"""How steady this machine's CPU is, with nothing of vgpu running: a fixed compute loop
(a float32 matrix product on one thread) counted in equal windows, first in one process,
then in as many processes as the main job runs instances (3 for scenario 6), all at once.
It prints each window's rate, the coefficient of variation and the largest step from one
window to the next, and what that noise means for an interleaved verdict at a tolerance.

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
    per_process = [[float(x) for x in child.communicate()[0].split()] for child in children]
    return [sum(column) for column in zip(*per_process, strict=True)]


def describe(label: str, rates: list[float], tolerance_pct: float) -> None:
    mean = statistics.fmean(rates)
    cv = 100 * statistics.stdev(rates) / mean
    steps = [100 * abs(math.log(b / a)) for a, b in itertools.pairwise(rates)]
    # an A B | B A block's log ratio is the mean of two windows a side against the other's
    # two: its sd is about one window's CV when the windows are independent
    block_sd = cv
    # TOST at a true difference of 0: one-sided 2.5% each way, power 0.8
    blocks = math.ceil(((1.96 + 1.28) * block_sd / tolerance_pct) ** 2)
    print(f"{label}: {' '.join(f'{r:.0f}' for r in rates)}")
    print(f"  mean {mean:.0f}/s, CV {cv:.1f}%, largest step between windows "
          f"{max(steps):.1f}%; a block's log ratio would vary by about {block_sd:.1f}%, "
          f"so a PASS of no difference at {tolerance_pct:g}% needs about {blocks} blocks")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows", type=int, default=10)
    parser.add_argument("--window-s", type=float, default=2.0)
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--tolerance-pct", type=float, default=2.0)
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPU(s); {args.windows} windows of {args.window_s:g} s")
    for processes in sorted({1, args.processes}):
        rates = windows_of(processes, args.windows, args.window_s)
        describe(f"{processes} process(es)", rates, args.tolerance_pct)


if __name__ == "__main__":
    main()

"""Verdicts replayed on real runs: the sequential decision of `vgpu bench --scenario 6`
(interleaved with its bare-metal twin) applied to windows of one long real session.

A real session decides an A/A in about 10-20 blocks of two runs; thirty real sessions
would take hours on a small machine. Instead one long session of fixed blocks is recorded
(`vgpu bench --scenario 6 -w resnet50-offline --with-baseline --runs N`, stored, no
verdict needed) and windows of it are judged exactly as the main job judges a session:
the first block of a window is its unjudged warm-up, the next four its pilot, then the
looks of vgpu/results/verdict/sequential.py with the check bench makes (system throughput,
interleaved crossover analysis on the log scale, band >= -tolerance). A block with a run
beyond the disturbance limits (vgpu/results/store/disturbance.py) is set aside and the next
one takes its place, as the bench replaces it. Windows that do not overlap are
independent sessions; ``--stride 2`` also starts a session at every other block (more
sessions from the same runs, not independent: their rates are shown apart).

Record the runs on a quiet machine (each run also records what else used it):

    VGPU_IGNORE_DISTURBANCE=1 vgpu bench --scenario 6 -w resnet50-offline \\
        --with-baseline --runs 60 --duration 3 --no-report --db aa.db
    vgpu bench ... --inject-slowdown 5 --db ab5.db      # a real slowdown, same way

    .venv/bin/python benchmarks/verdict_replay.py aa.db ab5.db [--stride 2]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from vgpu.results.store.disturbance import LIMITS, OTHER_CPU
from vgpu.results.verdict.compare import band_for, compare_paired, holm
from vgpu.results.verdict.sequential import DEFAULT_MAX_BLOCKS, Design, look, with_schedule

PILOT_BLOCKS = 4  # scenario 6's 3 repeats completed to ABBA pairs
TOLERANCE = 0.02


@dataclass(frozen=True)
class Block:
    index: int  # in the recorded session: even blocks ran the reference first
    candidate: float  # system samples/s
    reference: float
    other_cpu_pct: float  # the larger of the two runs'
    seconds: float  # wall time: from its first run's start to the next block's


@dataclass(frozen=True)
class Session:
    verdict: str
    blocks: int
    set_aside: int
    seconds: float
    difference_pct: float


def read_blocks(db: Path) -> list[Block]:
    """The recorded session's blocks: the candidate's and the reference's run of each
    repeat index, with every instance VALID."""
    con = sqlite3.connect(db)
    runs = con.execute(
        "SELECT r.id, r.repeat_index, json_extract(r.workload_detail, '$.design.role'), "
        "r.started_at, r.ended_at, (SELECT SUM(i.throughput) FROM instances i "
        "WHERE i.run_id = r.id AND i.validity = 'VALID'), (SELECT COUNT(*) FROM instances i "
        "WHERE i.run_id = r.id AND i.validity != 'VALID'), (SELECT MAX(m.value) FROM "
        "metrics m WHERE m.run_id = r.id AND m.instance IS NULL AND m.name = ?) "
        "FROM runs r WHERE r.status = 'ok' ORDER BY r.id", (OTHER_CPU,)).fetchall()
    by_index: dict[int, dict[str, tuple[float, float]]] = {}
    span: dict[int, list[float]] = {}
    for _id, index, role, started, ended, total, invalid, other in runs:
        span.setdefault(index, []).extend((float(started), float(ended)))
        if role in ("candidate", "reference") and total and not invalid:
            by_index.setdefault(index, {})[role] = (total, other or 0.0)
    starts = sorted((min(times), index) for index, times in span.items())
    wall = {index: (starts[k + 1][0] if k + 1 < len(starts) else max(span[index])) - start
            for k, (start, index) in enumerate(starts)}
    return [Block(index, sides["candidate"][0], sides["reference"][0],
                  max(sides["candidate"][1], sides["reference"][1]), wall[index])
            for index, sides in sorted(by_index.items()) if len(sides) == 2]


def replay(blocks: list[Block], start: int, max_blocks: int) -> Session | None:
    """One session whose warm-up is ``blocks[start]``; None when the recording ends
    before the session decides or spends its budget."""
    design = Design(min_repeats=PILOT_BLOCKS, max_repeats=max_blocks, step=2)
    band = band_for(higher_is_better=True, tolerance=TOLERANCE)
    used: list[Block] = []
    set_aside, position, total, look_index = 0, start + 1, PILOT_BLOCKS, 1
    seconds = blocks[start].seconds
    while True:
        while len(used) < total:
            if position >= len(blocks):
                return None
            block = blocks[position]
            position += 1
            seconds += block.seconds
            if block.other_cpu_pct > LIMITS[OTHER_CPU]:
                set_aside += 1
                continue
            used.append(block)
        check = compare_paired("system_throughput", [b.candidate for b in used],
                               [b.reference for b in used], band, "samples/s",
                               [b.index for b in used])
        step = look(holm([check]), len(used), look_index, design)
        design = with_schedule(design, step)
        if step.stop:
            return Session(step.verdict, len(used), set_aside, seconds, check.difference_pct)
        total, look_index = step.next_total, look_index + 1


def sessions(blocks: list[Block], stride: int | None, max_blocks: int) -> list[Session]:
    """Back-to-back sessions (``stride`` None) or one starting every ``stride`` blocks."""
    found, start = [], 0
    while start < len(blocks):
        session = replay(blocks, start, max_blocks)
        if session is None:
            break
        found.append(session)
        start += stride if stride else session.blocks + session.set_aside + 1
    return found


def row(name: str, found: list[Session]) -> str:
    n = len(found)
    if n == 0:
        return f"| {name} | 0 | | | | | | |"
    counts = Counter(s.verdict for s in found)
    share = {v: f"{counts[v]} ({counts[v] / n:.0%})" for v in ("FAIL", "PASS", "INCONCLUSIVE")}
    return (f"| {name} | {n} | {share['FAIL']} | {share['PASS']} | {share['INCONCLUSIVE']} | "
            f"{statistics.fmean(s.difference_pct for s in found):+.2f}% | "
            f"{statistics.fmean(s.blocks for s in found):.1f} "
            f"(+{sum(s.set_aside for s in found)} set aside) | "
            f"{statistics.fmean(s.seconds for s in found) / 60:.1f} min |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db", type=Path, nargs="+", help="recorded sessions")
    parser.add_argument("--stride", type=int, default=2,
                        help="also replay sessions starting every STRIDE blocks (0: off)")
    parser.add_argument("--max-blocks", type=int, default=DEFAULT_MAX_BLOCKS)
    args = parser.parse_args()
    print(f"band >= -{TOLERANCE:.0%}, pilot {PILOT_BLOCKS} blocks, budget "
          f"{args.max_blocks} blocks, disturbance limit {LIMITS[OTHER_CPU]:g}% other CPU")
    print("| recording | sessions | FAIL | PASS | INCONCLUSIVE | mean difference | "
          "mean blocks | mean time |")
    print("|---|---|---|---|---|---|---|---|")
    for db in args.db:
        blocks = read_blocks(db)
        disturbed = sum(b.other_cpu_pct > LIMITS[OTHER_CPU] for b in blocks)
        label = f"{db.name}: {len(blocks)} blocks, {disturbed} disturbed"
        print(row(f"{label}, back to back", sessions(blocks, None, args.max_blocks)))
        if args.stride:
            print(row(f"{label}, every {args.stride} blocks (overlapping)",
                      sessions(blocks, args.stride, args.max_blocks)))


if __name__ == "__main__":
    main()

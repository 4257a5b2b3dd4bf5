"""Verdicts against reality: real runs through the real CLI, LoadGen and ONNX Runtime on
this machine, judged by vgpu itself.

1. A/A, interleaved: `vgpu bench --scenario 6 --with-baseline` runs scenario 6 and its
   bare-metal twin bm6 block by block on this machine's CPU: the same configuration on
   both sides. Every FAIL is false; also counted: CIs of the headline that exclude 0.
2. A/B, interleaved: the same with `--inject-slowdown 5` and `10` on scenario 6 (busy
   waiting after each batch; bm6 unslowed). The slowdown really delivered is measured
   independently of the verdicts: the mean over every block of every A/B run of the
   per-block relative difference. Goals: -10% FAIL in >= 80%, -5% never PASS.
3. A/A, separate series: every A/A run's scenario-6 series against the bm6 series of
   ANOTHER run (`vgpu compare`), first with the stated uncalibrated series level, then
   after `vgpu calibrate noise --from-runs` on the bm6 series of the first half of the
   runs (the class of scenario 6 calibrated from its own first half, compared on the
   second half).

Prints per kind: runs, FAIL / INCONCLUSIVE / PASS counts and rates, CIs excluding 0,
mean blocks and seconds per decision.

    .venv/bin/python benchmarks/verdict_calibration.py [--aa 10] [--ab 5] [--duration 3]
        [--max-repeats 6] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

VGPU = [sys.executable, "-m", "vgpu"]
WORKLOAD = "resnet50-offline"


@dataclass
class Decision:
    verdict: str
    ci: tuple[float, float] | None
    difference_pct: float
    blocks: int
    seconds: float
    series: dict[str, int] = field(default_factory=dict)  # scenario id -> a run id


def bench(db: Path, work: Path, args: argparse.Namespace, slowdown: float) -> Decision:
    argv = [*VGPU, "bench", "--scenario", "6", "-w", WORKLOAD, "--with-baseline",
            "--no-report", "--json", "--db", str(db), "--duration", str(args.duration),
            "--until-decided", "--max-repeats", str(args.max_repeats)]
    if slowdown:
        argv += ["--inject-slowdown", f"{slowdown:g}"]
    started = time.monotonic()
    done = subprocess.run(argv, cwd=work, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    if done.returncode not in (0, 3):
        raise SystemExit(f"bench failed ({done.returncode}):\n{done.stderr[-3000:]}")
    workload = json.loads(done.stdout)["workloads"][0]
    check = workload["checks"][0]
    runs = workload["run_ids"]
    return Decision(workload["verdict"], tuple(check["ci95_pct"]) if check["ci95_pct"]
                    else None, check["difference_pct"], len(runs), seconds,
                    {"6": runs[0]})


def compare(db: Path, candidate_run: int, reference_run: int) -> Decision:
    done = subprocess.run([*VGPU, "compare", str(candidate_run), str(reference_run), "--db",
                           str(db), "--json"], capture_output=True, text=True, check=False)
    if done.returncode not in (0, 3):
        raise SystemExit(f"compare failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout)
    check = result["checks"][0]
    return Decision(result["verdict"], tuple(check["ci95_pct"]) if check["ci95_pct"]
                    else None, check["difference_pct"], check["candidate"]["n"], 0.0)


def twin_runs(db: Path) -> list[tuple[int, int]]:
    """(scenario 6 run, its interleaved bm6 partner's run) per A/A bench, in order."""
    import sqlite3

    rows = sqlite3.connect(db).execute(
        "SELECT id, series_id, scenario_id, workload_detail FROM runs WHERE status = 'ok' "
        "AND repeat_index = 0 ORDER BY id").fetchall()
    first_run = {series: run_id for run_id, series, _, _ in rows}
    pairs = []
    for run_id, _series, scenario, detail in rows:
        design = json.loads(detail).get("design") or {}
        if scenario == "6" and design.get("partner") in first_run and \
                "injected_slowdown" not in json.loads(detail):
            pairs.append((run_id, first_run[design["partner"]]))
    return pairs


def report(name: str, decisions: list[Decision]) -> None:
    counts = Counter(d.verdict for d in decisions)
    n = len(decisions)
    excl = sum(1 for d in decisions if d.ci and (d.ci[0] > 0 or d.ci[1] < 0))
    blocks = statistics.fmean(d.blocks for d in decisions)
    secs = statistics.fmean(d.seconds for d in decisions)
    diffs = [d.difference_pct for d in decisions]
    print(f"{name:<44} n={n:<3} FAIL {counts['FAIL']:>2} ({counts['FAIL'] / n:5.1%})  "
          f"INCONCLUSIVE {counts['INCONCLUSIVE']:>2}  PASS {counts['PASS']:>2} "
          f"({counts['PASS'] / n:5.1%})  CI excludes 0: {excl / n:5.1%}  mean diff "
          f"{statistics.fmean(diffs):+.2f}% (sd {statistics.pstdev(diffs):.2f})  "
          f"repeats/blocks {blocks:.1f}  {secs:.0f} s each", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aa", type=int, default=10, help="A/A interleaved runs")
    parser.add_argument("--ab", type=int, default=5, help="A/B runs per slowdown")
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per repeat")
    parser.add_argument("--max-repeats", type=int, default=6)
    parser.add_argument("--out", type=Path, default=None, help="keep the databases here")
    parser.add_argument("--separate-only", action="store_true",
                        help="only step 3, on the A/A database an earlier run left in --out")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="vgpu-calibration-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"databases and logs in {out}", flush=True)

    aa_db = out / "aa.db"
    if not args.separate_only:
        interleaved(aa_db, out, args)
    separate(aa_db)


def interleaved(aa_db: Path, out: Path, args: argparse.Namespace) -> None:
    aa = [bench(aa_db, out, args, 0.0) for _ in range(args.aa)]
    report("A/A interleaved (6 vs bm6, same CPU)", aa)
    for slowdown in (5.0, 10.0):
        ab = [bench(out / f"ab{slowdown:g}.db", out, args, slowdown) for _ in range(args.ab)]
        delivered = statistics.fmean(d.difference_pct for d in ab)
        report(f"A/B interleaved, injected -{slowdown:g}%", ab)
        print(f"  delivered slowdown, mean of the runs' block differences: {delivered:+.2f}%")


def separate(aa_db: Path) -> None:
    pairs = twin_runs(aa_db)
    separate = [compare(aa_db, pairs[i][0], pairs[(i + 1) % len(pairs)][1])
                for i in range(len(pairs))]
    report("A/A separate series, uncalibrated default", separate)
    half = len(pairs) // 2
    if half >= 2:
        subprocess.run([*VGPU, "calibrate", "noise", "--from-runs",
                        ",".join(str(c) for c, _ in pairs[:half]), "--db", str(aa_db)],
                       check=True)
        later = pairs[half:]
        calibrated = [compare(aa_db, later[i][0], later[(i + 1) % len(later)][1])
                      for i in range(len(later))]
        report("A/A separate series, calibrated class", calibrated)


if __name__ == "__main__":
    main()

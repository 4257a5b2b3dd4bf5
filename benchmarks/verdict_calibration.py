"""Verdicts against reality: real runs through the real CLI, LoadGen and ONNX Runtime on
this machine, judged by vgpu itself.

Every bench is the main job exactly as `scripts/bench.sh` runs it by default (`vgpu bench
--scenario 6`: a new database, so scenario 6 runs interleaved block by block with its
bare-metal twin bm6 that the database lacks, warm-up run first, sequential looks up to the
default budget of DEFAULT_MAX_BLOCKS blocks, disturbance judged: VGPU_IGNORE_DISTURBANCE
is removed from the child's environment), except `-w resnet50-offline`, `--duration`, and
the output options `--db`, `--json`, `--no-report`; `--max-repeats` only when given.

Parts (`--parts`, default all, in this order):

- **aa**: A/A, interleaved: the same configuration on both sides. Every FAIL is false;
  also counted: CIs of the headline that exclude 0.
- **ab**: A/B, interleaved: the same with `--inject-slowdown 5` and `10` on scenario 6
  (busy waiting after each batch; bm6 unslowed). The slowdown really delivered is the
  mean of the runs' block differences. Goals: -10% FAIL in >= 80%, -5% never PASS.
- **hog**: A/A with a deliberately busy machine: busy loops (one per core, processes
  outside this tree) beside scenario 6's runs of blocks HOG_BLOCKS (their first try),
  started after the first blocks and stopped before the end. Expected: no FAIL, and the
  disturbance named (the blocks set aside and run again, or the verdict INCONCLUSIVE
  naming the run).
- **separate**: every A/A bench's scenario-6 series against the bm6 series of ANOTHER
  bench (`vgpu compare`), first with the stated uncalibrated series level, then after
  `vgpu calibrate noise --from-runs` on the first half (compared on the second half).
  Needs the aa part's databases (this run's, or an earlier one's in --out).

Prints each decision as it comes (verdict, blocks, seconds), then per part: counts and
rates of FAIL / INCONCLUSIVE / PASS, CIs excluding 0, mean blocks and seconds per
decision, the total wall time, and a Markdown table to paste into docs/results.md.

    .venv/bin/python benchmarks/verdict_calibration.py [--aa 10] [--ab 5] [--hog 5]
        [--duration 3] [--max-repeats N] [--parts aa,ab,hog,separate] [--out DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the hog lives with the tests' labs
from tests.labs.cpuhog import other_process_hog

VGPU = [sys.executable, "-m", "vgpu"]
WORKLOAD = "resnet50-offline"
PARTS = ("aa", "ab", "hog", "separate")
HOG_BLOCKS = (2, 3)  # block indexes (0-based) whose scenario-6 run gets the hog
IGNORE_ENV = "VGPU_IGNORE_DISTURBANCE"  # vgpu.results.store.disturbance.IGNORE_ENV


@dataclass
class Decision:
    verdict: str
    ci: tuple[float, float] | None
    difference_pct: float
    blocks: int
    seconds: float
    named_disturbance: bool = False


@dataclass
class Part:
    name: str
    decisions: list[Decision]
    note: str = ""


def child_env() -> dict[str, str]:
    """This environment without VGPU_IGNORE_DISTURBANCE: disturbance judged, as by default."""
    return {k: v for k, v in os.environ.items() if k != IGNORE_ENV}


def bench_argv(db: Path, args: argparse.Namespace, slowdown: float) -> list[str]:
    """`vgpu bench --scenario 6` as scripts/bench.sh runs it, with this tool's workload,
    duration and output options."""
    argv = [*VGPU, "bench", "--scenario", "6", "-w", WORKLOAD, "--duration",
            f"{args.duration:g}", "--db", str(db), "--json", "--no-report"]
    if args.max_repeats is not None:
        argv += ["--max-repeats", str(args.max_repeats)]
    if slowdown:
        argv += ["--inject-slowdown", f"{slowdown:g}"]
    return argv


def fresh_db(out: Path, part: str) -> Path:
    """A new database (and its folder, where the logs go) for one bench."""
    for k in range(1, 100_000):
        folder = out / f"{part}-{k}"
        if not folder.exists():
            folder.mkdir(parents=True)
            return folder / "vgpu-results.db"
    raise SystemExit(f"no free folder name for {part} in {out}")


def bench(db: Path, args: argparse.Namespace, slowdown: float = 0.0,
          hog: bool = False) -> Decision:
    started = time.monotonic()
    child = subprocess.Popen(bench_argv(db, args, slowdown), cwd=db.parent, env=child_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with hog_beside_blocks(db, child) if hog else contextlib.nullcontext():
        stdout, stderr = child.communicate()
    seconds = time.monotonic() - started
    if child.returncode not in (0, 3):
        raise SystemExit(f"bench failed ({child.returncode}):\n{stderr[-3000:]}")
    workload = json.loads(stdout)["workloads"][0]
    check = workload["checks"][0] if workload["checks"] else None
    notes = workload["detail"].get("notes") or []
    named = any("set aside" in n or "disturbed" in n for n in notes)
    return Decision(workload["verdict"] or "INCONCLUSIVE",
                    tuple(check["ci95_pct"]) if check and check["ci95_pct"] else None,
                    check["difference_pct"] if check else 0.0, len(workload["run_ids"]),
                    seconds, named)


def _running_hog_run(db: Path, hogged: set[int]) -> tuple[int, int] | None:
    """The running scenario-6 run of a HOG_BLOCKS block not hogged yet (run id, block),
    or None."""
    if not db.exists():
        return None
    try:
        with contextlib.closing(sqlite3.connect(db, timeout=1.0)) as conn:
            row = conn.execute(
                "SELECT id, repeat_index FROM runs WHERE scenario_id = '6' AND status = "
                "'running' ORDER BY id DESC LIMIT 1").fetchone()
    except sqlite3.Error:  # not migrated yet, or busy: the next poll
        return None
    if row is None or row[1] not in HOG_BLOCKS or row[1] in hogged:
        return None
    return int(row[0]), int(row[1])


def _run_is_running(db: Path, run_id: int) -> bool:
    try:
        with contextlib.closing(sqlite3.connect(db, timeout=1.0)) as conn:
            row = conn.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()
    except sqlite3.Error:
        return True
    return row is not None and row[0] == "running"


@contextlib.contextmanager
def hog_beside_blocks(db: Path, child: subprocess.Popen[str]) -> Iterator[None]:
    """While ``child`` runs: busy loops through scenario 6's first try of each block in
    HOG_BLOCKS (found by polling its database), stopped when that run ends."""
    stop = threading.Event()

    def watch() -> None:
        hogged: set[int] = set()
        while not stop.is_set() and child.poll() is None:
            found = _running_hog_run(db, hogged)
            if found is None:
                time.sleep(0.1)
                continue
            run_id, block = found
            hogged.add(block)
            pids = [other_process_hog() for _ in range(os.cpu_count() or 1)]
            try:
                while not stop.is_set() and _run_is_running(db, run_id):
                    time.sleep(0.1)
            finally:
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join(timeout=30)


def compare(db: Path, candidate_run: int, reference_run: int) -> Decision:
    started = time.monotonic()
    done = subprocess.run([*VGPU, "compare", str(candidate_run), str(reference_run), "--db",
                           str(db), "--json"], capture_output=True, text=True, check=False,
                          env=child_env())
    if done.returncode not in (0, 3):
        raise SystemExit(f"compare failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout)
    check = result["checks"][0]
    return Decision(result["verdict"], tuple(check["ci95_pct"]) if check["ci95_pct"]
                    else None, check["difference_pct"], check["candidate"]["n"],
                    time.monotonic() - started)


def twin_runs(db: Path) -> list[tuple[int, int]]:
    """(scenario 6 run, its interleaved bm6 partner's run) per A/A bench, in order."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        rows = conn.execute(
            "SELECT id, series_id, scenario_id, workload_detail FROM runs WHERE status = "
            "'ok' ORDER BY id").fetchall()
    first_run: dict[str, int] = {}
    for run_id, series, _, _ in rows:
        first_run.setdefault(series, run_id)
    pairs = []
    for run_id, series, scenario, detail in rows:
        design = json.loads(detail).get("design") or {}
        if scenario == "6" and first_run[series] == run_id and \
                design.get("partner") in first_run and \
                "injected_slowdown" not in json.loads(detail):
            pairs.append((run_id, first_run[design["partner"]]))
    return pairs


def say(part: str, index: int, decision: Decision) -> None:
    named = "  disturbance named" if decision.named_disturbance else ""
    print(f"  {part} #{index}: {decision.verdict:<12} diff {decision.difference_pct:+.2f}%  "
          f"{decision.blocks} blocks  {decision.seconds:.0f} s{named}", flush=True)


def summary_line(part: Part) -> str:
    decisions = part.decisions
    n = len(decisions)
    counts = Counter(d.verdict for d in decisions)
    excl = sum(1 for d in decisions if d.ci and (d.ci[0] > 0 or d.ci[1] < 0))
    diffs = [d.difference_pct for d in decisions]
    return (f"{part.name}: n={n} FAIL {counts['FAIL']} ({counts['FAIL'] / n:.1%}) "
            f"INCONCLUSIVE {counts['INCONCLUSIVE']} PASS {counts['PASS']} "
            f"({counts['PASS'] / n:.1%}) CI excludes 0: {excl / n:.1%} mean diff "
            f"{statistics.fmean(diffs):+.2f}% (sd {statistics.pstdev(diffs):.2f}) "
            f"blocks {statistics.fmean(d.blocks for d in decisions):.1f} "
            f"{statistics.fmean(d.seconds for d in decisions):.0f} s each{part.note}")


def _rate(count: int, n: int) -> str:
    return f"{count} ({count / n:.0%})"


def markdown(parts: list[Part], total_s: float, args: argparse.Namespace) -> str:
    """The summary table, to paste into docs/results.md."""
    budget = "the default budget" if args.max_repeats is None else \
        f"--max-repeats {args.max_repeats}"
    lines = [f"`vgpu bench --scenario 6 -w {WORKLOAD} --duration {args.duration:g}` "
             f"({budget}), parts {args.parts}; total wall time {total_s / 60:.1f} min", "",
             "| part | n | FAIL | INCONCLUSIVE | PASS | CI excludes 0 | disturbance named "
             "| mean blocks | mean s per decision |",
             "|---|---|---|---|---|---|---|---|---|"]
    for part in parts:
        d = part.decisions
        n = len(d)
        counts = Counter(x.verdict for x in d)
        excl = sum(1 for x in d if x.ci and (x.ci[0] > 0 or x.ci[1] < 0))
        named = sum(x.named_disturbance for x in d)
        lines.append(f"| {part.name} | {n} | {_rate(counts['FAIL'], n)} | "
                     f"{_rate(counts['INCONCLUSIVE'], n)} | {_rate(counts['PASS'], n)} | "
                     f"{_rate(excl, n)} | {_rate(named, n)} | "
                     f"{statistics.fmean(x.blocks for x in d):.1f} | "
                     f"{statistics.fmean(x.seconds for x in d):.0f} |")
    return "\n".join(lines)


def run_benches(part: str, count: int, out: Path, args: argparse.Namespace,
                slowdown: float = 0.0, hog: bool = False) -> list[Decision]:
    decisions = []
    for index in range(1, count + 1):
        decisions.append(bench(fresh_db(out, part), args, slowdown, hog))
        say(part, index, decisions[-1])
    return decisions


def interleaved_parts(parts: set[str], out: Path, args: argparse.Namespace) -> list[Part]:
    done: list[Part] = []
    if "aa" in parts and args.aa:
        done.append(Part("A/A interleaved (6 vs bm6, same CPU)",
                         run_benches("aa", args.aa, out, args)))
    if "ab" in parts and args.ab:
        for slowdown in (5.0, 10.0):
            ab = run_benches(f"ab{slowdown:g}", args.ab, out, args, slowdown)
            delivered = statistics.fmean(d.difference_pct for d in ab)
            done.append(Part(f"A/B interleaved, injected -{slowdown:g}%", ab,
                             f" (delivered: {delivered:+.2f}%)"))
    if "hog" in parts and args.hog:
        done.append(Part(f"A/A, CPU hog beside scenario 6 in blocks "
                         f"{', '.join(str(b + 1) for b in HOG_BLOCKS)}",
                         run_benches("hog", args.hog, out, args, hog=True)))
    return done


def merged_aa(out: Path) -> Path:
    """Every A/A bench's database in --out copied into one (`vgpu results --copy-to`)."""
    merged = out / "aa-all.db"
    merged.unlink(missing_ok=True)
    for db in sorted(out.glob("aa-*/vgpu-results.db")):
        subprocess.run([*VGPU, "results", "--db", str(db), "--copy-to", str(merged)],
                       check=True, capture_output=True, env=child_env())
    return merged


def separate(out: Path) -> list[Part]:
    db = merged_aa(out)
    pairs = twin_runs(db) if db.exists() else []
    if len(pairs) < 2:
        print("separate: fewer than 2 A/A benches in --out: skipped", flush=True)
        return []
    uncalibrated = [compare(db, pairs[i][0], pairs[(i + 1) % len(pairs)][1])
                    for i in range(len(pairs))]
    done = [Part("A/A separate series, uncalibrated default", uncalibrated)]
    half = len(pairs) // 2
    if half >= 2:
        subprocess.run([*VGPU, "calibrate", "noise", "--from-runs",
                        ",".join(str(c) for c, _ in pairs[:half]), "--db", str(db)],
                       check=True, env=child_env())
        later = pairs[half:]
        done.append(Part("A/A separate series, calibrated class",
                         [compare(db, later[i][0], later[(i + 1) % len(later)][1])
                          for i in range(len(later))]))
    return done


def parse_parts(text: str) -> set[str]:
    chosen = {p.strip() for p in text.split(",") if p.strip()}
    unknown = chosen - set(PARTS)
    if unknown or not chosen:
        raise SystemExit(f"--parts: unknown {', '.join(sorted(unknown)) or '(none given)'}; "
                         f"choose from {','.join(PARTS)}")
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aa", type=int, default=10, help="A/A interleaved benches")
    parser.add_argument("--ab", type=int, default=5, help="A/B benches per slowdown")
    parser.add_argument("--hog", type=int, default=5, help="A/A benches with a CPU hog")
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per repeat")
    parser.add_argument("--max-repeats", type=int, default=None,
                        help="blocks at most (default: the bench's own default budget)")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help=f"which parts, comma-separated ({','.join(PARTS)})")
    parser.add_argument("--out", type=Path, default=None,
                        help="keep the databases here (and find the aa part's for separate)")
    args = parser.parse_args()
    parts = parse_parts(args.parts)
    out = args.out or Path(tempfile.mkdtemp(prefix="vgpu-calibration-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"databases and logs in {out}; parts {','.join(p for p in PARTS if p in parts)}",
          flush=True)
    started = time.monotonic()
    done = interleaved_parts(parts, out, args)
    if "separate" in parts:
        done += separate(out)
    total_s = time.monotonic() - started
    for part in done:
        print(summary_line(part), flush=True)
    print(f"total wall time {total_s:.0f} s", flush=True)
    if done:
        print()
        print(markdown(done, total_s, args))


if __name__ == "__main__":
    main()

"""The main job on a SIMULATED GPU (`vgpu bench --scenario 6 --simulated-gpu`), outside the
test suite: scenario 6's resnet50 and BERT Offline workloads interleaved with bm6, each
instance paced as a device of its planned slices with a GPU's 0.5% run-to-run noise
(loadgen/backends/simulated_device.py), timed by a GPU's rules.

    .venv/bin/python benchmarks/simulated_gpu_main_job.py [--cases aa,slow5] [--folder DIR]
    .venv/bin/python benchmarks/simulated_gpu_main_job.py --read DIR   # a run made by hand

Cases: `aa` (an A/A: the same CPU and device on both sides; expected PASS, exit 0) and
`slow5` (`--inject-slowdown 5`: the VM side's device 5% slower; expected FAIL, exit 3).
Prints per case the exit code, each workload's verdict, its time plan against what it
spent, the job's wall time, and the share of batches the CPU finished after the simulated
device would have (the CPU, not the device, set the pace there: near 0 for a valid proof).
The runs set VGPU_IGNORE_DISTURBANCE when --ignore-disturbance is given (a machine busy
with other, lower-priority jobs: their CPU share is still recorded and shown)."""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASES = {"aa": [], "slow5": ["--inject-slowdown", "5"]}
EXPECTED = {"aa": 0, "slow5": 3}


def run_case(folder: Path, case: str, ignore_disturbance: bool) -> tuple[int, float]:
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "160"}
    if ignore_disturbance:
        env["VGPU_IGNORE_DISTURBANCE"] = "1"
    started = time.monotonic()
    with (folder / "out.txt").open("w") as out:
        done = subprocess.run(
            [sys.executable, "-m", "vgpu", "bench", "--scenario", "6", "--simulated-gpu",
             "-w", "resnet50-offline", "-w", "bert-offline", "--db", str(folder / "r.db"),
             "--report", str(folder / "report.html"), *CASES[case]],
            cwd=folder, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
    return done.returncode, time.monotonic() - started


def summary(folder: Path) -> list[str]:
    """What the stored runs say: per candidate workload its verdict line, plan and time."""
    lines: list[str] = []
    db = sqlite3.connect(f"file:{folder / 'r.db'}?mode=ro", uri=True)
    rows = db.execute("SELECT series_id, scenario_id, workload, workload_detail FROM runs "
                      "WHERE status = 'ok' ORDER BY id").fetchall()
    last: dict[tuple[str, str], dict[str, object]] = {}
    for series, scenario, workload, detail in rows:
        last[(scenario, workload)] = {"series": series, **json.loads(detail or "{}")}
    for (scenario, workload), detail in last.items():
        if scenario != "6":
            continue
        notes = [str(n) for n in detail.get("notes", [])]  # type: ignore[union-attr]
        plan = next((n for n in notes if n.startswith("time plan")), "no time plan")
        lines += [f"  {workload}", f"    {plan}"]
    output = (folder / "out.txt").read_text() if (folder / "out.txt").exists() else ""
    lines += [f"  {line.strip()}" for line in output.splitlines()
              if ("time: " in line and "blocks in" in line) or line.startswith("scenario 6:")
              or ("look " in line and ("PASS" in line or "FAIL" in line))]
    late, batches = 0, 0
    for result in folder.glob("vgpu-results/**/result.json"):
        device = (json.loads(result.read_text()).get("backend") or {}).get(
            "simulated_device") or {}
        late += int(device.get("cpu_late_batches") or 0)
        batches += int(device.get("batches") or 0)
    if batches:
        lines.append(f"  CPU late for the simulated device: {late} of {batches} batches "
                     f"({100.0 * late / batches:.2f}%)")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="aa,slow5")
    parser.add_argument("--folder", type=Path)
    parser.add_argument("--read", type=Path, help="summarise a finished run's folder")
    parser.add_argument("--ignore-disturbance", action="store_true")
    args = parser.parse_args()
    if args.read:
        print("\n".join(summary(args.read)))
        return 0
    root = args.folder or Path(tempfile.mkdtemp(prefix="vgpu-simgpu-"))
    failed = 0
    for case in args.cases.split(","):
        code, took = run_case(root / case, case, args.ignore_disturbance)
        print(f"{case}: exit {code} (expected {EXPECTED[case]}), {took / 60:.1f} min")
        print("\n".join(summary(root / case)))
        failed += code != EXPECTED[case]
    print(f"folder: {root}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

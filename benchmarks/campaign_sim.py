"""The 4-host campaign of docs/campaign.md on `vgpu sim up --hosts 4 --no-xorg
--device-model gpu` (vCLS and agent VMs, compute GPUs without Xorg, a guest per VM in the
lab's Docker daemon, its runs paced as a simulated GPU), outside the test suite, as root:

    .venv/bin/python benchmarks/campaign_sim.py [--runs 3] [--duration 2] [--tolerance 5]
                                                [--slowdown 10] [--folder DIR]

Two campaigns on one lab, one after the other:

1. `good`: every host's upgrade is good: expected PASS, exit 0, one report.
2. `regress`: host 3's upgrade slows its guests' harness by --slowdown percent: expected
   FAIL at host 3 (exit 3), host 4 never drained.

Prints each campaign's exit code, verdict per host, time per phase and in all. The
baselines captured by the first campaign serve the second (the same hosts)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
HOSTS = [f"DC0_C0_H{i}" for i in range(4)]
PHASES = ("baseline", "drain", "upgrade", "undrain", "revalidate", "gate")


def vgpu(folder: Path, *args: str) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200",
           "VGPU_SIM_STATE_DIR": str(folder / "sim-state")}
    done = subprocess.run([sys.executable, "-m", "vgpu", *args], cwd=folder, env=env,
                          capture_output=True, text=True, check=False)
    (folder / "outputs.txt").open("a").write(f"== {args}: exit {done.returncode}\n"
                                             f"{done.stdout}{done.stderr}\n")
    return done.returncode, done.stdout + done.stderr


def campaign(folder: Path, name: str, args: argparse.Namespace,
             faults: dict[str, dict[str, float]]) -> None:
    spec = {"name": name, "hosts": HOSTS, "scenarios": ["5"],
            "workloads": ["resnet50-offline"], "runs": args.runs,
            "duration_s": args.duration, "baseline_series": 3,
            "tolerance_pct": args.tolerance,
            "upgrade": {"method": "sim", "esxi_build": f"2402251{len(name)}",
                        "faults": faults}}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    started = time.monotonic()
    code, _ = vgpu(folder, "campaign", "run", str(path), "--report",
                   str(folder / f"{name}.html"))
    took = time.monotonic() - started
    report = json.loads((folder / f"{name}.json").read_text())
    print(f"\ncampaign {name}: exit {code}, {report['status']}, {took:.0f} s in all"
          f"{': ' + report['reason'] if report['reason'] else ''}")
    print(f"{'host':<11} {'verdict':<13} " + " ".join(f"{p:>10}" for p in PHASES))
    for host in report["hosts"]:
        seconds = host["seconds_per_phase"]
        cells = " ".join(f"{seconds[p]:>9.0f}s" if seconds[p] is not None else f"{'-':>10}"
                         for p in PHASES)
        print(f"{host['host']:<11} {host['verdict'] or '-':<13} {cells}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--duration", type=float, default=2.0)
    parser.add_argument("--tolerance", type=float, default=5.0)
    parser.add_argument("--slowdown", type=float, default=10.0)
    parser.add_argument("--folder", type=Path, default=None)
    args = parser.parse_args()
    folder = args.folder or Path(tempfile.mkdtemp(prefix="vgpu-campaign-"))
    folder.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    code, out = vgpu(folder, "sim", "up", "--port", "0", "--hosts", "4", "--gpus", "1",
                     "--no-xorg", "--device-model", "gpu")
    if code != 0:
        sys.exit(f"vgpu sim up failed:\n{out}")
    try:
        campaign(folder, "good", args, {})
        campaign(folder, "regress", args, {HOSTS[2]: {"slowdown_pct": args.slowdown}})
    finally:
        vgpu(folder, "sim", "down")
    print(f"\nboth campaigns with the lab: {time.monotonic() - started:.0f} s "
          f"(outputs: {folder / 'outputs.txt'})")


if __name__ == "__main__":
    main()

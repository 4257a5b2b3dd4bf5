"""How apply scales with the number of VMs, measured on the vSphere simulator lab.

Applies scenario 5 (1 VM, 1g.10gb) and scenario 8 (7 VMs, 1g.10gb each) from scratch and
reports the wall time ratio 7 VMs / 1 VM (goal <= 1.5: VMs are built in parallel), then a
no-op re-apply of scenario 8 (goal <= 2 s: one read, no task).

Two latency profiles are run side by side: ``none`` (the simulator answers at once, so the
time is vgpu's own overhead) and ``vcenter-like`` (per-task delays in the range a real
vCenter shows for clone, reconfigure, customize, power-on; set in the simulator, not
measured here).

    .venv/bin/python benchmarks/apply_fanout.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from vgpu import catalog
from vgpu.model.load import load_inventory
from vgpu.sim.lab import LabShape, RunningLab, inventory_data, start_lab
from vgpu.vsphere.connection import connect
from vgpu.vsphere.execute import Executor
from vgpu.vsphere.from_inventory import target_from_inventory
from vgpu.vsphere.workflow import prepare_apply, prepare_destroy

PROFILES: dict[str, dict[str, int]] = {
    "none": {},
    "vcenter-like": {"CloneVM_Task": 800, "RelocateVM_Task": 300, "ReconfigVM_Task": 250,
                     "CustomizeVM_Task": 150, "PowerOnVM_Task": 400, "PowerOffVM_Task": 300,
                     "Destroy_Task": 200},
}


def _write_inventory(lab: RunningLab, folder: Path) -> Path:
    password = folder / "password"
    password.write_text(lab.password + "\n", encoding="utf-8")
    path = folder / "inventory.yaml"
    path.write_text(yaml.safe_dump(inventory_data(lab, password_file=str(password)),
                                   sort_keys=False), encoding="utf-8")
    return path


def _apply(inventory_path: Path, scenario_id: str) -> tuple[float, int]:
    """Full apply (login, read, plan, execute) of a catalogue scenario; (seconds, tasks)."""
    scenario = catalog.load(scenario_id)
    inventory = load_inventory(inventory_path)
    start = time.perf_counter()
    with connect(target_from_inventory(inventory, inventory_path)) as session:
        prep = prepare_apply(session, scenario, inventory, inventory_path)
        report = Executor(prep.state.placement, prep.state.hosts).run(prep.changes)
    elapsed = time.perf_counter() - start
    if report.failed:
        raise SystemExit(f"apply of scenario {scenario_id} failed: {report.failed}")
    return elapsed, report.tasks


def _destroy(inventory_path: Path, scenario_id: str) -> None:
    inventory = load_inventory(inventory_path)
    with connect(target_from_inventory(inventory, inventory_path)) as session:
        state, changes = prepare_destroy(session, scenario_id, inventory, inventory_path)
        Executor(state.placement, state.hosts).run(changes)


def _cli(*args: str) -> tuple[float, float]:
    """Run the vgpu CLI; (wall seconds, CPU seconds of the process). CPU time is what the
    wall time would be on an idle machine, since the no-op waits on nothing."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([str(Path(sys.executable).parent / "vgpu"), *args],
                   check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def run_profile(name: str, delays: dict[str, int], repeats: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="vgpu-bench-") as tmp:
        lab = start_lab(LabShape(hosts=2, method_delays_ms=delays), Path(tmp) / "lab")
        try:
            inventory = _write_inventory(lab, Path(tmp))
            one, seven = [], []
            for _ in range(repeats):
                one.append(_apply(inventory, "5")[0])
                _destroy(inventory, "5")
                seven.append(_apply(inventory, "8")[0])
                _destroy(inventory, "8")
            _apply(inventory, "8")
            noop = [_apply(inventory, "8") for _ in range(repeats)]
            assert all(tasks == 0 for _, tasks in noop), "a no-op apply started tasks"
            cli_noop = [_cli("apply", "--no-provision", "--scenario", "8", "-i", str(inventory),
                             "--yes") for _ in range(repeats)]
            cli_start = [_cli("version") for _ in range(repeats)]
        finally:
            lab.stop()
    return {
        "1 VM (s)": statistics.median(one),
        "7 VMs (s)": statistics.median(seven),
        "ratio 7/1": statistics.median(seven) / statistics.median(one),
        "no-op re-apply, in process (s)": statistics.median(t for t, _ in noop),
        "no-op re-apply, `vgpu apply` CLI, wall (s)": statistics.median(w for w, _ in cli_noop),
        "no-op re-apply, `vgpu apply` CLI, CPU (s)": statistics.median(c for _, c in cli_noop),
        "CLI start-up alone, `vgpu version`, wall (s)":
            statistics.median(w for w, _ in cli_start),
        "CLI start-up alone, `vgpu version`, CPU (s)":
            statistics.median(c for _, c in cli_start),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    results = {name: run_profile(name, delays, args.repeats)
               for name, delays in PROFILES.items()}
    metrics = list(next(iter(results.values())))
    width = max(len(m) for m in metrics)
    print(f"apply fan-out on the vSphere simulator (median of {args.repeats})")
    print(f"{'':{width}}  " + "  ".join(f"{p:>14}" for p in results))
    for metric in metrics:
        print(f"{metric:{width}}  " + "  ".join(f"{results[p][metric]:14.3f}" for p in results))
    ratio = results["vcenter-like"]["ratio 7/1"]
    noop = max(r["no-op re-apply, in process (s)"] for r in results.values())
    wall = max(r["no-op re-apply, `vgpu apply` CLI, wall (s)"] for r in results.values())
    cpu = max(r["no-op re-apply, `vgpu apply` CLI, CPU (s)"] for r in results.values())
    print(f"goal ratio 7/1 <= 1.5 with vCenter-like task latency: {ratio:.2f} "
          f"{'met' if ratio <= 1.5 else 'MISSED'}")
    print(f"goal no-op re-apply of 7 VMs <= 2 s: {noop:.2f} s in process "
          f"{'met' if noop <= 2 else 'MISSED'}; through the CLI {wall:.2f} s wall "
          f"{'met' if wall <= 2 else 'MISSED'}, {cpu:.2f} s CPU (the wall time on an idle "
          "machine; nearly all of it is Python start-up and CLI imports)")
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; "
          "with no latency the run is CPU-bound, so its ratio measures overhead, not fan-out")

if __name__ == "__main__":
    main()

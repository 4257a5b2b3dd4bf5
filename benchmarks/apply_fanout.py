"""How apply scales with the number of VMs, measured on the vSphere simulator lab.

Applies scenario 5 (1 VM, 1g.10gb) and scenario 8 (7 VMs, 1g.10gb each) from scratch and
reports the wall time ratio 7 VMs / 1 VM, then a no-op re-apply of scenario 8 (goal <= 2 s:
one read, no task). The 7 VMs are cloned and reconfigured in parallel, but the vGPU VMs of
one host power on one after another (ESXi picks a vGPU VM's GPU at power-on, so the order
is what makes the placement the plan's); the goal is therefore 7 VMs <= 1.5 x (one VM + 6
more power-ons).

Two latency profiles are run side by side: ``none`` (the simulator answers at once, so the
time is vgpu's own overhead) and ``vcenter-like`` (per-task delays in the range a real
vCenter shows for clone, reconfigure, customize, power-on; set in the simulator, not
measured here).

    .venv/bin/python benchmarks/apply_fanout.py [--repeats 3]

With ``--vms N`` it measures lab scale instead, vCenter-like latency only: a generated
scenario of N one-slice VMs on a lab with enough hosts, applied from scratch beside the
1-VM scenario (goal: N VMs <= 3x one VM), then a no-op re-apply of the N VMs (goal for
448 VMs: under 5 s). ``--concurrency`` sets the executor's bound (default: vgpu's).

    .venv/bin/python benchmarks/apply_fanout.py --vms 64 [--concurrency 64]
"""

from __future__ import annotations

import argparse
import math
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
from vgpu.vsphere.apply.execute import Executor
from vgpu.vsphere.connect.connection import connect
from vgpu.vsphere.connect.from_inventory import target_from_inventory
from vgpu.vsphere.desired.limits import DEFAULT_CONCURRENCY
from vgpu.vsphere.plan.gpu_placement import apply_policy_changes
from vgpu.vsphere.plan.host_options import apply_host_options
from vgpu.vsphere.plan.workflow import prepare_apply, prepare_destroy
from vgpu.vsphere.plan.xorg import put_in_effect

PROFILES: dict[str, dict[str, int]] = {
    "none": {},
    "vcenter-like": {"CloneVM_Task": 800, "RelocateVM_Task": 300, "ReconfigVM_Task": 250,
                     "CustomizeVM_Task": 150, "PowerOnVM_Task": 400, "PowerOffVM_Task": 300,
                     "Destroy_Task": 200},
}


SLICES_PER_HOST = 28  # 4 GPUs x 7 1g.10gb MIG slices
GROUP_MAX = 64  # the scenario schema's largest VM count per group


def _write_inventory(lab: RunningLab, folder: Path, vms: int = 30) -> Path:
    password = folder / "password"
    password.write_text(lab.password + "\n", encoding="utf-8")
    password.chmod(0o600)  # vgpu refuses a secret's file others can read
    path = folder / "inventory.yaml"
    last = 10 + vms  # 127.1.0.11 onwards, one address per VM
    pool = ("127.1.0.11", f"127.1.{last // 256}.{last % 256}")
    path.write_text(yaml.safe_dump(inventory_data(lab, password_file=str(password),
                                                  ip_pool=pool),
                                   sort_keys=False), encoding="utf-8")
    return path


def _scale_scenario(folder: Path, vms: int) -> Path:
    """Scenario 8 with its seven VMs replaced by ``vms`` small one-slice VMs."""
    data = yaml.safe_load(catalog.resolve("8").read_text(encoding="utf-8"))
    groups = math.ceil(vms / GROUP_MAX)
    data.update(id=f"scale{vms}", name=f"scale-{vms}x1g",
                description=f"{vms} one-slice VMs (apply fan-out benchmark)")
    data["vms"] = [{"name": f"sc{g}-{{n}}", "count": min(GROUP_MAX, vms - g * GROUP_MAX),
                    "vcpu": 2, "memory_gb": 4, "vgpus": ["nvidia-1-10c"]}
                   for g in range(groups)]
    path = folder / f"scale{vms}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _apply(inventory_path: Path, scenario_id: str,
           concurrency: int = DEFAULT_CONCURRENCY) -> tuple[float, int, int]:
    """Full apply (login, read, plan, execute) of a catalogue scenario; (seconds, tasks,
    property-collector rounds that watched those tasks)."""
    scenario = catalog.load(scenario_id)
    inventory = load_inventory(inventory_path)
    start = time.perf_counter()
    with connect(target_from_inventory(inventory, inventory_path)) as session:
        prep = prepare_apply(session, scenario, inventory, inventory_path)
        # the host settings first, as `vgpu apply` does: a GPU assignment policy left unset
        # under running vGPU VMs makes the CLI's re-apply refuse to change it
        apply_host_options(prep.host_options)
        apply_policy_changes(prep.policy_changes)
        for change in prep.policy_changes:
            put_in_effect(prep.state.hosts[change.host], [change.setting()])
        report = Executor(prep.state.placement, prep.state.hosts,
                          concurrency=concurrency).run(prep.changes)
    elapsed = time.perf_counter() - start
    if report.failed:
        raise SystemExit(f"apply of scenario {scenario_id} failed: {report.failed}")
    return elapsed, report.tasks, report.task_reads


def _destroy(inventory_path: Path, scenario_id: str,
             concurrency: int = DEFAULT_CONCURRENCY) -> None:
    inventory = load_inventory(inventory_path)
    with connect(target_from_inventory(inventory, inventory_path)) as session:
        state, changes = prepare_destroy(session, scenario_id, inventory, inventory_path)
        Executor(state.placement, state.hosts, concurrency=concurrency).run(changes)


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
            assert all(tasks == 0 for _, tasks, _ in noop), "a no-op apply started tasks"
            cli_noop = [_cli("apply", "--no-provision", "--scenario", "8", "-i", str(inventory),
                             "--yes") for _ in range(repeats)]
            cli_start = [_cli("version") for _ in range(repeats)]
        finally:
            lab.stop()
    return {
        "1 VM (s)": statistics.median(one),
        "7 VMs (s)": statistics.median(seven),
        "ratio 7/1": statistics.median(seven) / statistics.median(one),
        "no-op re-apply, in process (s)": statistics.median(t for t, _, _ in noop),
        "no-op re-apply, `vgpu apply` CLI, wall (s)": statistics.median(w for w, _ in cli_noop),
        "no-op re-apply, `vgpu apply` CLI, CPU (s)": statistics.median(c for _, c in cli_noop),
        "CLI start-up alone, `vgpu version`, wall (s)":
            statistics.median(w for w, _ in cli_start),
        "CLI start-up alone, `vgpu version`, CPU (s)":
            statistics.median(c for _, c in cli_start),
    }


def run_scale(vms: int, concurrency: int, repeats: int) -> dict[str, float]:
    """N one-slice VMs beside one VM, vCenter-like latency, one lab sized for N."""
    hosts = max(2, math.ceil(vms / SLICES_PER_HOST))
    shape = LabShape(hosts=hosts, method_delays_ms=PROFILES["vcenter-like"])
    with tempfile.TemporaryDirectory(prefix="vgpu-bench-") as tmp:
        lab = start_lab(shape, Path(tmp) / "lab")
        try:
            inventory = _write_inventory(lab, Path(tmp), vms)
            scenario = str(_scale_scenario(Path(tmp), vms))
            one, many, tasks, reads = [], [], 0, 0
            for _ in range(repeats):
                one.append(_apply(inventory, "5", concurrency)[0])
                _destroy(inventory, "5", concurrency)
                seconds, tasks, reads = _apply(inventory, scenario, concurrency)
                many.append(seconds)
                _destroy(inventory, f"scale{vms}", concurrency)
            _apply(inventory, scenario, concurrency)
            noop = [_apply(inventory, scenario, concurrency) for _ in range(repeats)]
            assert all(t == 0 for _, t, _ in noop), "a no-op apply started tasks"
        finally:
            lab.stop()
    return {"hosts": hosts, "tasks": tasks, "reads": reads, "one": statistics.median(one),
            "many": statistics.median(many), "noop": statistics.median(t for t, _, _ in noop)}


def report_scale(vms: int, concurrency: int, repeats: int) -> None:
    r = run_scale(vms, concurrency, repeats)
    ratio = r["many"] / r["one"]
    print(f"apply at lab scale on the vSphere simulator, vCenter-like task latency, "
          f"{r['hosts']:.0f} hosts, concurrency {concurrency} (median of {repeats})")
    print(f"1 VM: {r['one']:.2f} s; {vms} VMs ({r['tasks']:.0f} tasks): {r['many']:.2f} s; "
          f"ratio {vms}/1 {ratio:.2f} (goal <= 3: {'met' if ratio <= 3 else 'MISSED'})")
    print(f"tasks watched through one property collector: {r['reads']:.0f} reads for "
          f"{r['tasks']:.0f} tasks (polling each task reads it at least once: "
          f"{r['tasks']:.0f}+)")
    per_vm = r["noop"] / vms
    print(f"no-op re-apply of {vms} VMs, in process: {r['noop']:.2f} s "
          f"({per_vm * 1e3:.1f} ms per VM; at that rate 448 VMs take {per_vm * 448:.2f} s, "
          f"goal < 5 s)")
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--vms", type=int, default=0,
                        help="measure lab scale with this many VMs instead")
    parser.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY)
    args = parser.parse_args()
    if args.vms:
        report_scale(args.vms, args.concurrency, args.repeats)
        return
    results = {name: run_profile(name, delays, args.repeats)
               for name, delays in PROFILES.items()}
    metrics = list(next(iter(results.values())))
    width = max(len(m) for m in metrics)
    print(f"apply fan-out on the vSphere simulator (median of {args.repeats})")
    print(f"{'':{width}}  " + "  ".join(f"{p:>14}" for p in results))
    for metric in metrics:
        print(f"{metric:{width}}  " + "  ".join(f"{results[p][metric]:14.3f}" for p in results))
    ratio = results["vcenter-like"]["ratio 7/1"]
    power_on_s = PROFILES["vcenter-like"]["PowerOnVM_Task"] / 1000
    one = results["vcenter-like"]["1 VM (s)"]
    bound = 1.5 * (one + 6 * power_on_s) / one
    noop = max(r["no-op re-apply, in process (s)"] for r in results.values())
    wall = max(r["no-op re-apply, `vgpu apply` CLI, wall (s)"] for r in results.values())
    cpu = max(r["no-op re-apply, `vgpu apply` CLI, CPU (s)"] for r in results.values())
    print(f"goal ratio 7/1 <= {bound:.2f} with vCenter-like task latency (1.5 x one VM "
          f"plus 6 power-ons of {power_on_s:g} s in turn on one host): {ratio:.2f} "
          f"{'met' if ratio <= bound else 'MISSED'}")
    print(f"goal no-op re-apply of 7 VMs <= 2 s: {noop:.2f} s in process "
          f"{'met' if noop <= 2 else 'MISSED'}; through the CLI {wall:.2f} s wall "
          f"{'met' if wall <= 2 else 'MISSED'}, {cpu:.2f} s CPU (the wall time on an idle "
          "machine; nearly all of it is Python start-up and CLI imports)")
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; "
          "with no latency the run is CPU-bound, so its ratio measures overhead, not fan-out")

if __name__ == "__main__":
    main()

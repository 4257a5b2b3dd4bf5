"""Planning at lab scale: a 64-host inventory with 4 x A100 80GB each (256 GPUs) and a
scenario of 1,792 MIG VMs (seven 1g.10gb per GPU), planned and timed against one host's
plan (28 VMs); then a scenario one VM too big, whose error names the full hosts and the
nearest layout. Prints wall times and their ratio (median of a few rounds).

    .venv/bin/python benchmarks/plan_scale.py [--hosts 64] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from vgpu.errors import PlanError
from vgpu.model.inventory import Inventory
from vgpu.model.scenario import Scenario
from vgpu.planner import build_plan

GPUS_PER_HOST = 4
SLICES_PER_GPU = 7
GROUP = 64  # the most VMs one vms entry may expand to


def lab(hosts: int) -> Inventory:
    return Inventory.model_validate({
        "name": f"lab-{hosts}",
        "vcenter": {"host": "vc.lab", "user": "u", "password": {"env": "VC_PASSWORD"}},
        "placement": {"datacenter": "DC", "cluster": "C", "datastore": "DS",
                      "network": "VM Network", "template": "tpl"},
        "hosts": [{"name": f"esx{k:02d}", "gpus": [{"model": "A100-80GB",
                                                     "count": GPUS_PER_HOST}]}
                  for k in range(hosts)],
        "network": {"ip_pool": {"start": "10.1.0.1", "end": "10.1.31.254",
                                "netmask": "255.255.0.0", "gateway": "10.1.255.254"}},
    })


def scenario(vms: int) -> Scenario:
    return Scenario.model_validate({
        "id": "scale", "name": "scale", "platform": "vsphere", "gpu": "A100-80GB",
        "vms": [{"name": f"g{g}-{{n}}", "count": min(GROUP, vms - g * GROUP),
                 "vgpus": ["nvidia-1-10c"]} for g in range(-(-vms // GROUP))],
        "workloads": [{"name": "resnet50-offline", "model": "resnet50",
                       "scenario": "Offline"}],
    })


def timed(hosts: int, vms: int, rounds: int) -> tuple[float, str]:
    inventory, sc = lab(hosts), scenario(vms)
    times, outcome = [], ""
    for _ in range(rounds):
        start = time.perf_counter()
        try:
            plan = build_plan(sc, inventory, inventory_name="lab.yaml")
            outcome = f"{len(plan.vms)} VMs on {len({v.host for v in plan.vms})} hosts"
        except PlanError as exc:
            outcome = str(exc).splitlines()[0][:160]
        times.append(time.perf_counter() - start)
    return statistics.median(times), outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    per_host = GPUS_PER_HOST * SLICES_PER_GPU
    one, one_out = timed(1, per_host, args.rounds)
    full, full_out = timed(args.hosts, args.hosts * per_host, args.rounds)
    over, over_out = timed(args.hosts, args.hosts * per_host + 1, args.rounds)
    print(f"one host, {per_host} VMs:            {one * 1e3:8.1f} ms  ({one_out})")
    print(f"{args.hosts} hosts, {args.hosts * per_host} VMs:        {full * 1e3:8.1f} ms  "
          f"({full_out})")
    print(f"{args.hosts} hosts, {args.hosts * per_host + 1} VMs (too many): "
          f"{over * 1e3:8.1f} ms  ({over_out})")
    print(f"ratio {args.hosts} hosts / one host: {full / one:.1f}x "
          f"(goal: the full plan under 1 s: {'met' if full < 1.0 else 'NOT met'})")


if __name__ == "__main__":
    main()

"""Synchronised start of harness instances: measured side by side in one run.

Three harness instances (tiny ResNet50, Offline, fixed expected QPS, one intra-op thread
each) are started
  (a) the naive way: one subprocess after the other, each starting its timed test as soon
      as it has loaded and warmed up (no --sync);
  (b) the `vgpu bench` way: all started, each prints READY, then all get the same GO time.
For each round it prints the start skew (max - min of the instances' timed_start_unix),
the system throughput (sum over instances of LoadGen's samples/s), the overlap (share of
the span from the first start to the last end during which every instance was in its
timed test) and, from the completion timelines, the system throughput inside that shared
window; rounds alternate a/b to share the load conditions.
It also prints this process's own CPU time per instance for each way (the orchestrator's
cost; the instances are child processes and are not counted).
Run: .venv/bin/python benchmarks/bench_sync_start.py [rounds] [--instances 3]
    [--duration-ms 2000]

With ``--ssh`` (as root) every instance runs on its own loopback sshd host of the SSH test
lab, reached through its own SSH session, as `vgpu bench` drives a lab of VMs: only the
synchronised way is run, and the orchestrator's CPU per instance then includes the SSH
sessions' encryption.
    sudo .venv/bin/python benchmarks/bench_sync_start.py 1 --ssh --instances 64
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from loadgen.contract import parse_run_result  # noqa: E402
from tests.labs.sshlab import LabHost, SshLab  # noqa: E402
from tests.train.labnodes import install_lab_harness  # noqa: E402
from vgpu.bench.fanout import run_round  # noqa: E402
from vgpu.bench.overlap import round_overlap  # noqa: E402
from vgpu.remote.hostlog import HostLog  # noqa: E402
from vgpu.remote.local import LocalTransport  # noqa: E402
from vgpu.remote.redact import Redactor  # noqa: E402
from vgpu.remote.ssh import SSHTransport  # noqa: E402
from vgpu.remote.targets import ConnectOptions, HostTarget  # noqa: E402
from vgpu.targets.target import Target  # noqa: E402

INSTANCES: tuple[str, ...] = ("a", "b", "c")
DURATION_MS = 2000


def spec(instance: str, cache: Path) -> dict[str, object]:
    return {
        "schema_version": 1, "model": {"name": "resnet50", "variant": "tiny"},
        "backend": {"name": "onnxruntime", "threads": 1}, "device": {"kind": "cpu"},
        "loadgen": {"scenario": "Offline", "min_duration_ms": DURATION_MS,
                    "target_qps": 3000},
        "batch_size": 32, "instance_name": instance, "cache_dir": str(cache),
    }


def naive(work: Path, cache: Path) -> list[dict[str, object]]:
    processes = []
    for name in INSTANCES:
        folder = work / name
        folder.mkdir(parents=True)
        (folder / "spec.json").write_text(json.dumps(spec(name, cache)))
        processes.append(subprocess.Popen(
            [sys.executable, "-m", "loadgen", "run", str(folder / "spec.json"), "--out",
             str(folder)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    for process in processes:
        process.wait(timeout=300)
    return [json.loads((work / n / "result.json").read_text()) for n in INSTANCES]


def synchronised(work: Path, cache: Path) -> list[dict[str, object]]:
    transport = LocalTransport(home=work)
    targets = [Target(instance=n, transport=transport,
                      harness=f"{sys.executable} -m loadgen", work_root=str(work),
                      device={"kind": "cpu"}, device_label="CPU", target_kind="local",
                      threads=1, local_root=work) for n in INSTANCES]
    return _round(targets, {n: spec(n, cache) for n in INSTANCES}, work, "sync")


def _round(targets: list[Target], specs: dict[str, dict[str, object]], work: Path,
           tag: str) -> list[dict[str, object]]:
    """One synchronised round as `vgpu bench` runs it; each instance's result record."""
    result = run_round(targets, specs, {t.instance: work / t.instance for t in targets},
                       tag=tag, expected_s=DURATION_MS / 1e3)
    if result.failure:
        raise SystemExit(result.failure)
    return [o.record or {} for o in result.outcomes]


def _ssh_target(lab: SshLab, host: LabHost, name: str, logs: Path) -> Target:
    """A harness on ``host`` reached over its own SSH session, its Python a wrapper
    around an interpreter the host's user may run (where `vgpu provision` puts it)."""
    python = install_lab_harness(host)
    transport = SSHTransport(
        HostTarget(name=host.name, address=host.address, user=host.user, port=host.port,
                   key_file=lab.key_path, known_hosts=lab.known_hosts_path),
        ConnectOptions(connect_timeout=30, retries=2, backoff=0.2),
        HostLog(logs / f"{host.name}.log", Redactor()))
    transport.connect()
    return Target(instance=name, transport=transport,
                  harness=f"{python} -m loadgen",
                  work_root=f"{host.home}/.vgpu/bench", device={"kind": "cpu"},
                  device_label="CPU", target_kind="vm", threads=1)


def over_ssh(targets: list[Target], work: Path, homes: dict[str, Path]) -> list[dict[str, object]]:
    specs = {t.instance: spec(t.instance, homes[t.instance] / ".vgpu" / "models")
             for t in targets}
    return _round(targets, specs, work, work.name)


def main_ssh(rounds: int) -> None:
    """Every instance on its own SSH host; synchronised rounds only."""
    rows, cpu = [], []
    with tempfile.TemporaryDirectory() as tmp, SshLab(len(INSTANCES)) as lab, \
            ExitStack() as closing:
        root = Path(tmp)
        (root / "hostlogs").mkdir()
        targets = [_ssh_target(lab, host, name, root / "hostlogs")
                   for host, name in zip(lab.hosts, INSTANCES, strict=True)]
        for target in targets:
            closing.callback(target.transport.close)
        homes = {name: host.home for host, name in zip(lab.hosts, INSTANCES, strict=True)}
        over_ssh(targets, root / "warm", homes)  # each host builds its model once
        for number in range(rounds):
            before, started = time.process_time(), time.perf_counter()
            records = over_ssh(targets, root / f"r{number}", homes)
            wall = time.perf_counter() - started
            cpu.append((time.process_time() - before) / len(INSTANCES))
            late = max(float(r.get("sync", {}).get("late_s") or 0.0)  # type: ignore[union-attr]
                       for r in records)
            rows.append((*measure(records), wall, late))
    print(f"{len(INSTANCES)} instances, each on its own loopback SSH host and session, "
          f"{DURATION_MS} ms timed test each, {rounds} round(s), {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f} at the end")
    print(f"{'round':<6}{'skew ms':>9}{'samples/s':>11}{'overlap':>9}{'round s':>9}"
          f"{'GO late ms (max)':>18}")
    for number, (skew, rate, overlap, _, wall, late) in enumerate(rows):
        print(f"{number:<6}{skew:>9.1f}{rate:>11.0f}{overlap:>9.1%}{wall:>9.1f}"
              f"{late * 1e3:>18.1f}")
    print(f"median start skew {statistics.median(r[0] for r in rows):.1f} ms; orchestrator "
          f"CPU per instance per round {statistics.median(cpu) * 1e3:.1f} ms (SSH included)")


def measure(records: list[dict[str, object]]) -> tuple[float, float, float, float]:
    """Start skew (ms), system throughput, the share of the timed span during which
    every instance was in its timed test at once, and the system throughput counted
    inside that shared window only."""
    starts = [float(r["timed_start_unix"]) for r in records]  # type: ignore[arg-type]
    rates = [float(r["throughput"]["samples_per_second"]) for r in records]  # type: ignore[index]
    overlap = round_overlap({str(n): parse_run_result(r) for n, r in enumerate(records)})
    assert overlap is not None
    return ((max(starts) - min(starts)) * 1e3, sum(rates), overlap.fraction,
            sum(overlap.throughput.values()))


def options() -> tuple[int, bool]:
    """Parse the options into the module settings; the number of rounds, and --ssh."""
    global INSTANCES, DURATION_MS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rounds", type=int, nargs="?", default=3)
    parser.add_argument("--instances", type=int, default=3,
                        help="harness instances started together (default 3)")
    parser.add_argument("--duration-ms", type=int, default=DURATION_MS,
                        help="each instance's timed test, LoadGen min_duration_ms")
    parser.add_argument("--ssh", action="store_true",
                        help="each instance on its own loopback sshd host (needs root)")
    args = parser.parse_args()
    INSTANCES = tuple(f"i{n:03d}" for n in range(args.instances))
    DURATION_MS = args.duration_ms
    return int(args.rounds), bool(args.ssh)


def main() -> None:
    rounds, ssh = options()
    if ssh:
        main_ssh(rounds)
        return
    cpu: dict[str, list[float]] = {"naive": [], "synchronised": []}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cache = root / "models"
        naive(root / "warm", cache)  # builds the model once, outside the measurement
        results: dict[str, list[tuple[float, float, float, float]]] = {
            "naive": [], "synchronised": []}
        for number in range(rounds):
            for kind, way in (("naive", naive), ("synchronised", synchronised)):
                before = time.process_time()
                records = way(root / f"{kind[0]}{number}", cache)
                cpu[kind].append((time.process_time() - before) / len(INSTANCES))
                results[kind].append(measure(records))
    print(f"{len(INSTANCES)} instances, {DURATION_MS} ms timed test each, {rounds} rounds")
    print(f"{'round':<6}{'skew ms naive':>15}{'sync':>8}{'samples/s naive':>17}{'sync':>8}"
          f"{'overlap naive':>15}{'sync':>7}{'shared-window samples/s sync':>30}")
    for number in range(rounds):
        (ns, nt, no, _), (ss, st, so, sw) = (results["naive"][number],
                                             results["synchronised"][number])
        print(f"{number:<6}{ns:>15.1f}{ss:>8.1f}{nt:>17.0f}{st:>8.0f}{no:>15.1%}{so:>7.1%}"
              f"{sw:>30.0f}")

    def median(kind: str, field: int) -> float:
        return statistics.median(row[field] for row in results[kind])

    print(f"median start skew: naive {median('naive', 0):.1f} ms, synchronised "
          f"{median('synchronised', 0):.1f} ms")
    print(f"median share of the timed span with all instances running: naive "
          f"{median('naive', 2):.1%}, synchronised {median('synchronised', 2):.1%}")
    print("median system throughput ratio shared window/LoadGen, synchronised: "
          f"{median('synchronised', 3) / median('synchronised', 1):.3f}")
    print("median system throughput ratio synchronised/naive: "
          f"{median('synchronised', 1) / median('naive', 1):.3f}")
    print(f"median orchestrator CPU per instance: naive "
          f"{statistics.median(cpu['naive']) * 1e3:.1f} ms, synchronised "
          f"{statistics.median(cpu['synchronised']) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()

"""Allreduce bus bandwidth and training throughput at two link speeds, side by side.

Two nodes, each an SSH lab host in a network namespace of its own (tests/labs/netns.py),
joined through a bridge by veth pairs shaped with tc tbf. At each speed (alternating,
``--rounds`` times, so other load on the machine hits both alike) the allreduce probe runs
across the two nodes (Gloo, one rank per node) and then a short training run (resnet-tiny,
the CPU functional check). Needs root, sshd and iproute2 (`bash scripts/setup.sh --test`).

    .venv/bin/python benchmarks/probe_link.py [--slow-mbit 100] [--fast-mbit 400]
        [--rounds 2] [--size 1048576 --size 4194304] [--iterations 3]

Prints busbw at each speed (peak over sizes, Mbit/s and GB/s), the ratio of the two
against the ratio of the link speeds (goal: within 20%), and the training throughput
lost on the slower link."""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the namespace and SSH labs live with the tests

from tests.labs.netns import NetnsLab, netns_available  # noqa: E402
from tests.labs.sshlab import SshLab, lab_available  # noqa: E402
from tests.train.labnodes import lab_train_nodes, link_scenario  # noqa: E402
from vgpu.train.launch import TrainNode  # noqa: E402
from vgpu.train.probe import ProbeSettings, run_probe  # noqa: E402
from vgpu.train.scenario_runner import run_training_scenario  # noqa: E402
from vgpu.train.session import CPU_CHECK  # noqa: E402

GOAL = 0.20


def _peak_busbw_gb_s(record: dict[str, object]) -> float:
    rows = record["rows"]
    assert isinstance(rows, list)
    return max(float(row["busbw_gb_s"]) for row in rows)


def measure(net: NetnsLab, nodes: list[TrainNode], mbit: int, settings: ProbeSettings,
            work: Path, tag: str) -> tuple[float, float]:
    """Peak busbw (GB/s) and training images/s across the two nodes at ``mbit``."""
    net.shape_all(mbit)
    scenario = link_scenario(work, mbit)
    probe = run_probe(scenario, nodes, work / f"probe-{tag}", settings=settings)
    (train,) = run_training_scenario(scenario, nodes, work / f"train-{tag}",
                                     overrides=CPU_CHECK)
    if train.record.get("status") != "ok":
        raise SystemExit(f"training at {mbit} Mbit/s failed: {train.record.get('reason')}")
    return _peak_busbw_gb_s(probe.record), float(train.record["totals"]["images_per_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slow-mbit", type=int, default=100)
    parser.add_argument("--fast-mbit", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--size", type=int, action="append")
    parser.add_argument("--iterations", type=int, default=3)
    args = parser.parse_args()
    reason = lab_available() or netns_available()
    if reason:
        raise SystemExit(reason)
    sizes = tuple(args.size or (1 << 20, 4 << 20))
    settings = ProbeSettings(sizes_bytes=sizes, iterations=args.iterations,
                             warmup_iterations=1)
    speeds = (args.slow_mbit, args.fast_mbit)
    busbw: dict[int, list[float]] = {s: [] for s in speeds}
    images: dict[int, list[float]] = {s: [] for s in speeds}
    with tempfile.TemporaryDirectory(prefix="vgpu-probe-link-") as tmp, NetnsLab(2) as net, \
            SshLab(2, guest_sim=False, netns=net) as lab, \
            lab_train_nodes(lab, Path(tmp)) as nodes:
        for round_index in range(args.rounds):
            order = speeds if round_index % 2 == 0 else speeds[::-1]
            for mbit in order:
                bw, ips = measure(net, nodes, mbit, settings, Path(tmp), f"{mbit}-{round_index}")
                busbw[mbit].append(bw)
                images[mbit].append(ips)
    report(speeds, busbw, images, sizes)


def report(speeds: tuple[int, int], busbw: dict[int, list[float]],
           images: dict[int, list[float]], sizes: tuple[int, ...]) -> None:
    slow, fast = speeds
    print(f"two nodes in their own namespaces, Gloo, sizes {', '.join(map(str, sizes))} B")
    for mbit in speeds:
        bw = statistics.median(busbw[mbit])
        print(f"link {mbit:>5} Mbit/s: busbw {bw:.5f} GB/s = {bw * 8000:7.1f} Mbit/s "
              f"({bw * 8000 / mbit:.0%} of the link); training "
              f"{statistics.median(images[mbit]):.1f} images/s")
    ratio = statistics.median(busbw[fast]) / statistics.median(busbw[slow])
    expected = fast / slow
    off = abs(ratio - expected) / expected
    print(f"busbw ratio {fast}/{slow}: {ratio:.3f} against link ratio {expected:.3f} "
          f"({off:.1%} off; goal within {GOAL:.0%}: {'met' if off <= GOAL else 'NOT met'})")
    loss = 1 - statistics.median(images[slow]) / statistics.median(images[fast])
    print(f"training throughput lost at {slow} Mbit/s against {fast} Mbit/s: {loss:.1%}")


if __name__ == "__main__":
    main()

"""Harness in a container vs the same harness in the host venv, on this machine's CPU,
measured side by side: the same spec (model, batch, threads, LoadGen settings) run
alternately on the host and in a container of the harness image (private Docker daemon
of tests/labs/dockerlab.py, image built FROM a local Debian base with the CPU
onnxruntime of the host venv's version), several rounds, the order swapped every round.

Prints each round's samples/s and the ratio container/host, then the median ratio
(goal >= 0.98), and the same from the harness's CPU time per sample, which other load on
a shared machine disturbs far less. The two runs of a round share one model cache folder
(mounted into the container), so both measure the same graph.

    .venv/bin/python benchmarks/container_overhead.py [--rounds 5] [--seconds 10]
        [--variant tiny|full] [--batch 8]

Needs root, docker.io and debootstrap (``bash scripts/setup.sh --test``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the Docker lab lives with the tests

from tests.labs.dockerlab import DockerLab, lab_available  # noqa: E402
from vgpu.container import docker  # noqa: E402
from vgpu.container.local import memlock_unlimited_allowed  # noqa: E402
from vgpu.container.spec import ContainerSpec, harness_run_command  # noqa: E402


def spec(variant: str, batch: int, seconds: float, qps: float) -> dict[str, object]:
    return {
        "schema_version": 1,
        "model": {"name": "resnet50", "variant": variant, "precision": "fp32"},
        "backend": {"name": "onnxruntime", "threads": 1},
        "device": {"kind": "cpu"},
        "loadgen": {"scenario": "Offline", "mode": "PerformanceOnly",
                    "min_duration_ms": int(seconds * 1000), "min_query_count": 1,
                    "target_qps": qps, "performance_sample_count": 64},
        "batch_size": batch, "seed": 7, "warmup_queries": 4, "cache_dir": "models",
    }


def _record(out: Path) -> dict[str, Any]:
    record: dict[str, Any] = json.loads((out / "result.json").read_text())
    if record["status"] != "ok":
        raise RuntimeError(f"run failed: {record['reason']}")
    return record


def rate(out: Path) -> float:
    return float(_record(out)["throughput"]["samples_per_second"])


def cpu_ms_per_sample(out: Path) -> float:
    """The harness process's CPU time in the timed run per sample: other load on a shared
    machine moves it far less than the wall-clock rate."""
    record = _record(out)
    cpu_s = record["telemetry"]["host"]["process_cpu_seconds_timed"]
    return 1000.0 * float(cpu_s) / int(record["sample_count"])


def run_host(work: Path, tag: str) -> float:
    out = work / f"host-{tag}"
    subprocess.run([sys.executable, "-m", "loadgen", "run", str(work / "spec.json"),
                    "--out", str(out)], check=True, capture_output=True, cwd=ROOT, timeout=900)
    return rate(out)


def run_container(lab: DockerLab, image: str, work: Path, tag: str) -> float:
    container = ContainerSpec(image=image, run_id=f"bench-{tag}", instance="overhead",
                              work_dir=work, command=harness_run_command("spec.json",
                                                                         f"container-{tag}",
                                                                         sync=None),
                              interactive=False,
                              memlock_unlimited=memlock_unlimited_allowed())
    subprocess.run(docker.run_argv(container, lab.cli), check=True, capture_output=True,
                   timeout=900)
    return rate(work / f"container-{tag}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--variant", default="tiny", choices=("tiny", "full"))
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    reason = lab_available()
    if reason:
        print(f"cannot run: {reason}")
        return 1
    ratios: list[float] = []
    cpu_ratios: list[float] = []
    with DockerLab() as lab, tempfile.TemporaryDirectory(prefix="vgpu-ovh-") as folder:
        # The same ONNX Runtime as the host venv, so the ratio is the container's cost and
        # not a difference between two ORT releases.
        image = lab.build_harness(tag="vgpu-harness:overhead",
                                  ort_version=metadata.version("onnxruntime")).tag
        work = Path(folder)
        # A short host run builds the shared model cache and measures the rate that LoadGen's
        # Offline expected QPS is then set from (x1.1), so both runs last about --seconds.
        (work / "spec.json").write_text(json.dumps(spec(args.variant, args.batch, 1.0, 200)))
        qps = 1.1 * run_host(work, "warm")
        (work / "spec.json").write_text(json.dumps(spec(args.variant, args.batch,
                                                        args.seconds, qps)))
        for n in range(args.rounds):
            first_host = n % 2 == 0
            order = ("host", "container") if first_host else ("container", "host")
            rates = {}
            for kind in order:
                rates[kind] = (run_host(work, str(n)) if kind == "host"
                               else run_container(lab, image, work, str(n)))
            ratio = rates["container"] / rates["host"]
            ratios.append(ratio)
            cpu = {kind: cpu_ms_per_sample(work / f"{kind}-{n}") for kind in rates}
            cpu_ratio = cpu["host"] / cpu["container"]
            cpu_ratios.append(cpu_ratio)
            print(f"round {n + 1} ({order[0]} first): host {rates['host']:.1f}/s, "
                  f"container {rates['container']:.1f}/s, container/host {ratio:.3f}; "
                  f"CPU ms/sample host {cpu['host']:.3f}, container {cpu['container']:.3f}, "
                  f"ratio {cpu_ratio:.3f}", flush=True)
    print(f"resnet50/{args.variant} fp32 b{args.batch}, 1 thread, {args.seconds:g} s per run: "
          f"median container/host {statistics.median(ratios):.3f} over {len(ratios)} rounds "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f}; goal >= 0.98); by CPU time per "
          f"sample, host/container median {statistics.median(cpu_ratios):.3f} "
          f"(min {min(cpu_ratios):.3f}, max {max(cpu_ratios):.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Real short benches for the MLPerf export tests: `vgpu` run as a process in a folder with
its own harness cache, and a tiny resnet50 bench under --mlperf-rules with an accuracy
pass."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.bench.conftest import RAN_AND_STORED, VGPU, vgpu_env

SUBMITTER = "vgpu-lab"
RESNET_SCENARIO = """\
id: export-rn50
name: resnet50 with an accuracy pass
platform: bare-metal
gpu: A100-80GB
vms:
  - name: rn50-1g
    vgpus: [1g.10gb]
workloads:
  - name: resnet50-accuracy
    model: resnet50
    scenario: {scenario}
    batch: {batch}
{latency}    precision: fp32
    accuracy_target: 0.99
    accuracy_samples: {samples}
repeats: 1
"""


def run_vgpu(folder: Path, cache: Path, *args: str,
          timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*VGPU, *args], cwd=folder, env=vgpu_env(cache), capture_output=True,
                          text=True, timeout=timeout, check=False)


def bench_resnet_with_accuracy(folder: Path, cache: Path, *args: str, samples: int = 256,
                               scenario: str = "Offline", timeout: float = 300) -> None:
    """A bench of tiny resnet50 under --mlperf-rules with an accuracy pass of ``samples``.
    SingleStream (batch 1) ends its timed part at min_duration whatever the CPU's speed;
    its expected latency is set below the real one so that LoadGen generates enough
    queries for the whole duration. Offline's lasts as long as its one query, sized from
    a calibration probe."""
    single = scenario == "SingleStream"
    text = RESNET_SCENARIO.format(samples=samples, scenario=scenario,
                                  batch=1 if single else 64,
                                  latency="    target_latency_ms: 0.1\n" if single else "")
    (folder / "rn50.yaml").write_text(text)
    done = run_vgpu(folder, cache, "bench", "--scenario", "rn50.yaml", "--mlperf-rules", *args,
                 timeout=timeout)
    assert done.returncode in RAN_AND_STORED, done.stdout + done.stderr

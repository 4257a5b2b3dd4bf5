"""Triton deployed by `vgpu bench` as a container on this machine, driven by the harness:
the docker lab runs the test Triton image (the real server binary from the
nvidia-pytriton wheel, CPU python-backend model), one server serves both planned
instances, the server-side split is stored, summarised and reported, and the server
container is gone afterwards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.labs.dockerlab import BuildResult, HarnessLab
from tests.labs.tritonimage import triton_image  # noqa: F401 (fixture)
from vgpu.container import docker
from vgpu.container.triton import SERVER_LABEL
from vgpu.exitcodes import EXIT_NO_REFERENCE
from vgpu.results.store.result_store import ResultStore
from vgpu.results.views.server_split import SPLIT_METRICS

pytestmark = [pytest.mark.docker, pytest.mark.triton, pytest.mark.slow,
              pytest.mark.timeout(2400)]
ROOT = Path(__file__).resolve().parents[2]
BENCH_TIMEOUT_S = 600
SCENARIO = """\
id: triton-local
name: triton-on-this-machine
platform: bare-metal
gpu: A100-80GB
vms:
  - {{name: "t-a", vgpus: [1g.10gb]}}
  - {{name: "t-b", vgpus: [1g.10gb]}}
guest:
  triton_image: {image}
workloads:
  - name: resnet50-triton
    model: resnet50
    variant: tiny
    backend: triton
    scenario: Offline
    batch: 8
repeats: 2
"""


def _servers(lab: HarnessLab) -> list[str]:
    argv = lab.lab.cli.argv("ps", "-a", "--filter", f"label={SERVER_LABEL}", "--format",
                            "{{.Names}}")
    listing = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60)
    return docker.output_lines(listing.stdout)


def _bench(lab: HarnessLab, folder: Path, image: str) -> subprocess.Popen[str]:
    scenario = folder / "triton.yaml"
    scenario.write_text(SCENARIO.format(image=image))
    host = lab.lab.cli.host
    assert host is not None
    argv = [sys.executable, "-m", "vgpu", "bench", str(scenario), "--duration", "1.5",
            "--db", str(folder / "r.db"), "--report", str(folder / "r.html"),
            "--docker-host", host, "--json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VGPU_HARNESS_CACHE": str(folder / "m")}
    return subprocess.Popen(argv, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)


def _seen_while_running(lab: HarnessLab, process: subprocess.Popen[str],
                        before: set[str]) -> set[str]:
    """The server containers that appeared while the bench ran (polled until one does)."""
    deadline = time.monotonic() + BENCH_TIMEOUT_S
    while time.monotonic() < deadline and process.poll() is None:
        names = set(_servers(lab)) - before
        if names:
            return names
        time.sleep(0.2)
    return set()


def test_a_deployed_triton_server_serves_the_bench_and_is_removed(
        docker_lab: HarnessLab, triton_image: BuildResult, tmp_path: Path) -> None:  # noqa: F811
    before = set(_servers(docker_lab))  # a session killed with its daemon leaves some
    process = _bench(docker_lab, tmp_path, triton_image.tag)
    seen = _seen_while_running(docker_lab, process, before)
    out, err = process.communicate(timeout=BENCH_TIMEOUT_S)
    assert process.returncode == EXIT_NO_REFERENCE, err[-3000:]  # no reference stored
    assert len(seen) == 1 and next(iter(seen)).startswith("vgpu-triton-"), seen
    assert set(_servers(docker_lab)) == before
    [workload] = json.loads(out)["workloads"]
    split = workload["triton_server_split_us"]
    assert set(split) == {"t-a", "t-b"}
    assert all(value > 0 for parts in split.values() for value in parts.values())
    servers = workload["detail"]["triton"]["servers"]
    assert [s["model_backend"] for s in servers.values()] == ["python"]
    with ResultStore.open(tmp_path / "r.db") as store:
        runs = store.runs(status="ok")
        assert len(runs) == 2
        for run in runs:
            stored = {(m.instance, m.name): m.value for m in store.metrics(run.id)}
            for instance in ("t-a", "t-b"):
                for name in SPLIT_METRICS.values():
                    assert stored[(instance, name)] > 0, (run.id, instance, name)
            for item in store.instances(run.id):
                assert item.result.result["backend"]["url"] == servers["localhost"]["url"]
    report = (tmp_path / "r.html").read_text()
    assert "Triton server-side time per request" in report
    assert (tmp_path / "vgpu-results" / "triton").exists()

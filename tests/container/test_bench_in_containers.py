"""`vgpu bench --runtime container` on this machine: every harness instance of scenario 6
runs in its own container of the harness image (seen in `docker ps` during the run), the
records carry the image and its ID, and a container killed mid-run fails that instance
with the reason while the others are stored."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.labs.dockerlab import HarnessLab
from vgpu.container import docker
from vgpu.container.spec import INSTANCE_LABEL, RUN_LABEL
from vgpu.exitcodes import EXIT_NO_REFERENCE, exit_for
from vgpu.results.store.result_store import ResultStore

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(2400)]
ROOT = Path(__file__).resolve().parents[2]
INSTANCES = {"s6-4g", "s6-2g", "s6-1g"}


def _bench(lab: HarnessLab, db: Path, duration: str, runs: str) -> subprocess.Popen[str]:
    host = lab.lab.cli.host
    assert host is not None
    argv = [sys.executable, "-m", "vgpu", "bench", "--scenario", "6", "-w", "resnet50-offline",
            "--runs", runs, "--duration", duration, "--db", str(db), "--no-report", "--no-baseline",
            "--runtime", "container", "--image", lab.image.tag, "--docker-host", host]
    return subprocess.Popen(argv, cwd=db.parent, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


def _running(lab: HarnessLab) -> dict[str, str]:
    """Instance -> container name of vgpu's running harness containers."""
    fmt = '{{.Names}} {{.Label "' + INSTANCE_LABEL + '"}}'
    argv = lab.lab.cli.argv("ps", "--filter", f"label={RUN_LABEL}", "--format", fmt)
    listing = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60)
    pairs = (line.split() for line in docker.output_lines(listing.stdout))
    return {instance: name for name, instance in pairs}


def _watch(lab: HarnessLab, process: subprocess.Popen[str], until: float,
           wanted: int) -> dict[str, str]:
    """Polls `docker ps` while the bench runs; the first listing with ``wanted`` of
    vgpu's containers running (or {} when the bench ended first)."""
    while time.monotonic() < until and process.poll() is None:
        seen = _running(lab)
        if len(seen) >= wanted:
            return seen
        time.sleep(0.2)
    return {}


def test_a_killed_container_fails_its_instance_and_the_others_are_stored(
        docker_lab: HarnessLab, tmp_path: Path) -> None:
    process = _bench(docker_lab, tmp_path / "r.db", duration="6", runs="1")
    deadline = time.monotonic() + 600
    # After the probe round, the timed round's three containers run together.
    seen = {}
    while time.monotonic() < deadline and process.poll() is None:
        seen = _watch(docker_lab, process, deadline, len(INSTANCES))
        if seen and "-run-" in seen["s6-2g"]:
            break
        time.sleep(0.5)
    assert seen and "-run-" in seen["s6-2g"], seen
    # inside the 6 s timed run: LoadGen's log begun (before the synchronised start, the
    # round would stop every instance)
    started = tmp_path / "vgpu-results" / "1" / "s6-2g" / "mlperf_log_detail.txt"
    while not started.exists() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.1)
    assert started.exists(), process.poll()
    time.sleep(1)
    subprocess.run(docker.kill_argv([seen["s6-2g"]], docker_lab.lab.cli), check=True,
                   capture_output=True, timeout=60)
    out, err = process.communicate(timeout=600)
    assert process.returncode == 1, out + err
    assert "instance s6-2g: harness container was killed by signal 9" in " ".join(err.split())
    with ResultStore.open(tmp_path / "r.db") as store:
        [run] = store.runs()
        assert run.status == "failed"
        by_name = {i.result.name: i.result for i in store.instances(run.id)}
        assert by_name["s6-2g"].status == "failed"
        for name in ("s6-4g", "s6-1g"):
            assert by_name[name].status == "ok" and by_name[name].throughput
    assert _running(docker_lab) == {}


def test_each_instance_in_its_own_container_then_compared_with_a_host_run(
        docker_lab: HarnessLab, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    # half-second runs: what is checked is where they ran and what was stored
    in_container = _bench(docker_lab, db, duration="0.5", runs="2")
    seen = _watch(docker_lab, in_container, time.monotonic() + 600, len(INSTANCES))
    out, err = in_container.communicate(timeout=900)
    # no bare-metal run is stored in this store: nothing to judge against (exit 5)
    assert in_container.returncode == EXIT_NO_REFERENCE, out + err
    assert set(seen) == INSTANCES, seen
    assert "container runtime: each instance in its own container of" in out + err
    with ResultStore.open(db) as store:
        container_runs = store.runs(status="ok")
        assert len(container_runs) == 2
        for item in store.instances(container_runs[0].id):
            platform = item.result.platform
            assert platform is not None and platform.runtime == "container"
            assert platform.container_image == docker_lab.image.tag
            assert platform.container_image_id == docker_lab.image.image_id
            assert platform.ort_package == "onnxruntime" and platform.ort_version
            assert item.result.throughput and item.result.throughput > 0
        assert {i.result.name for i in store.instances(container_runs[0].id)} == INSTANCES
    on_host = subprocess.run(
        [sys.executable, "-m", "vgpu", "bench", "--scenario", "6", "-w", "resnet50-offline",
         "--runs", "2", "--duration", "0.5", "--db", str(db), "--no-report",
         "--no-baseline"],
        cwd=tmp_path, capture_output=True, text=True, timeout=900,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert on_host.returncode == EXIT_NO_REFERENCE, on_host.stdout + on_host.stderr
    with ResultStore.open(db) as store:
        runs = store.runs(status="ok")
    container_run, host_run = runs[0].id, runs[-1].id
    compared = subprocess.run(
        [sys.executable, "-m", "vgpu", "compare", str(container_run), str(host_run),
         "--db", str(db), "--tolerance", "50"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    text = " ".join((compared.stdout + compared.stderr).split())
    verdict = re.search(r"verdict: (PASS|FAIL|INCONCLUSIVE)", text)
    assert verdict is not None, text
    # two short runs a side on shared cores may leave it undecided: the code says which
    assert compared.returncode == exit_for(verdict.group(1)), text
    assert "[local, container]" in text and "[local, host]" in text

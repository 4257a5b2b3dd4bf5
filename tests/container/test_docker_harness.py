"""The harness image in a real (private) Docker daemon: it builds, reports its versions,
runs a LoadGen test on this machine's CPU with the READY/GO protocol, and a killed
container ends with a non-zero exit code.

The first session on a machine builds the base image (debootstrap) and the harness image
(pip downloads): minutes; later sessions reuse the cached data root and docker's layer
cache."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import IO, Any

import pytest

from loadgen.sync import READY_LINE
from tests.labs.dockerlab import HarnessLab
from tests.loadgen.harness_helpers import base_spec
from vgpu.container import (
    ContainerSpec,
    describe_exit,
    docker,
    harness_run_command,
    killed_by,
)
from vgpu.container.local import memlock_unlimited_allowed

# The first test of a session pays for the image builds (fixture setup counts here).
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(2400)]

RUN_TIMEOUT_S = 300.0


def line_reader(stream: IO[str]) -> queue.Queue[str | None]:
    """Lines of ``stream`` on a queue (None at EOF), so reads can have a deadline."""
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def wait_for_ready(process: subprocess.Popen[str], timeout: float) -> list[str]:
    """Reads stdout until the READY line (an image's entrypoint may print a banner first)."""
    assert process.stdout is not None
    lines = line_reader(process.stdout)
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        if line is None:
            code = process.wait(timeout=30)
            raise AssertionError(f"exit {code} ({describe_exit(code)}) before {READY_LINE!r}; "
                                 f"stdout {seen}, stderr:\n{stderr_of(process)}")
        seen.append(line)
        if line.rstrip("\n") == READY_LINE:
            return seen


def harness_spec(lab: HarnessLab, work_dir: Path, instance: str, cpus: float | None = 1.0,
                 **loadgen: Any) -> ContainerSpec:
    """A tiny ResNet50 Offline spec in work_dir/instance/, as a ContainerSpec."""
    (work_dir / instance).mkdir(parents=True)
    doc = base_spec(Path("/work/models"), instance_name=instance)
    doc["loadgen"].update({"min_duration_ms": 3000, **loadgen})
    (work_dir / instance / "spec.json").write_text(json.dumps(doc), encoding="utf-8")
    return ContainerSpec(
        image=lab.image.tag, run_id=f"t{uuid.uuid4().hex[:10]}", instance=instance,
        work_dir=work_dir, cpus=cpus, memlock_unlimited=memlock_unlimited_allowed(),
        command=harness_run_command(f"{instance}/spec.json", f"{instance}/out"))


def start(lab: HarnessLab, spec: ContainerSpec) -> subprocess.Popen[str]:
    return subprocess.Popen(docker.run_argv(spec, lab.lab.cli), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def stderr_of(process: subprocess.Popen[str]) -> str:
    if process.poll() is None or process.stderr is None:
        return ""
    return process.stderr.read()


def stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.kill()
        process.wait(timeout=30)


def listed(lab: HarnessLab, spec: ContainerSpec) -> list[str]:
    done = subprocess.run(docker.ps_argv(spec.run_id, spec.instance, lab.lab.cli),
                          capture_output=True, text=True, check=True, timeout=30)
    return docker.output_lines(done.stdout)


def test_harness_image_builds_and_rebuilds_from_cache(docker_lab: HarnessLab) -> None:
    lab = docker_lab.lab
    assert docker_lab.image.image_id.startswith("sha256:")
    inspect = lab.docker("image", "inspect", "--format",
                         '{{json .Config.Labels}} {{.Size}}', docker_lab.image.tag)
    labels_json, size = inspect.stdout.rsplit(" ", 1)
    labels = json.loads(labels_json)
    assert labels["vgpu.harness.version"] == "1.0.0"
    assert labels["vgpu.harness.ort-package"] == "onnxruntime"
    assert 100e6 < int(size) < 3e9
    again = lab.build_harness()
    assert again.image_id == docker_lab.image.image_id
    assert "Using cache" in again.log
    assert again.seconds < 120


def test_version_inside_the_image(docker_lab: HarnessLab) -> None:
    # `python` from PATH: the image's venv, also on the Debian base that has only python3.
    done = docker_lab.lab.docker("run", "--rm", "--network=none", docker_lab.image.tag,
                                 "python", "-m", "loadgen", "--version", timeout=120)
    info = json.loads(done.stdout)
    assert info["harness"] == "1.0.0"
    assert info["executable"] == "/opt/harness/bin/python"
    assert info["onnxruntime"]["package"] == "onnxruntime"
    assert info["onnxruntime"]["version"] == "1.23.2"
    assert "CPUExecutionProvider" in info["onnxruntime"]["providers"]
    assert info["mlcommons-loadgen"] == "6.0.17"
    assert info["numpy"] and info["onnx"]


def test_harness_run_in_a_container_writes_result(docker_lab: HarnessLab,
                                                   tmp_path: Path) -> None:
    spec = harness_spec(docker_lab, tmp_path, "vm1-0")
    process = start(docker_lab, spec)
    try:
        assert process.stdin is not None and process.stdout is not None
        wait_for_ready(process, RUN_TIMEOUT_S)
        go = time.time() + 0.5
        process.stdin.write(f"GO {go:.6f}\n")
        process.stdin.flush()
        process.wait(timeout=RUN_TIMEOUT_S)
    finally:
        stop(process)
    assert process.returncode == 0, stderr_of(process)
    record = json.loads((tmp_path / "vm1-0" / "out" / "result.json").read_text())
    assert record["status"] == "ok", record.get("reason")
    assert record["instance_name"] == "vm1-0"
    assert record["scenario"] == "Offline"
    assert record["throughput"]["samples_per_second"] > 0
    assert record["sync"]["mode"] == "stdin"
    assert record["sync"]["go_unix"] == pytest.approx(go, abs=1e-5)
    assert (tmp_path / "models").is_dir()  # the model cache went to the mounted work dir
    assert listed(docker_lab, spec) == []  # --rm: gone after it exited


def test_killed_container_exits_non_zero(docker_lab: HarnessLab, tmp_path: Path) -> None:
    # A long timed phase (about 20 s at this machine's rate) so the kill lands mid-run.
    spec = harness_spec(docker_lab, tmp_path, "vm1-1", min_duration_ms=60000)
    detail_log = tmp_path / "vm1-1" / "out" / "mlperf_log_detail.txt"
    process = start(docker_lab, spec)
    try:
        assert process.stdin is not None
        wait_for_ready(process, RUN_TIMEOUT_S)
        process.stdin.write(f"GO {time.time():.6f}\n")
        process.stdin.flush()
        deadline = time.monotonic() + 60
        while not detail_log.exists() and process.poll() is None:
            assert time.monotonic() < deadline, "LoadGen did not start within 60 s"
            time.sleep(0.1)
        assert listed(docker_lab, spec) == [spec.name]
        subprocess.run(docker.kill_argv([spec.name], docker_lab.lab.cli), check=True,
                       capture_output=True, timeout=60)
        code = process.wait(timeout=60)
    finally:
        stop(process)
    assert code == 137, describe_exit(code)
    assert killed_by(code) == 9
    assert not (tmp_path / "vm1-1" / "out" / "result.json").exists()
    deadline = time.monotonic() + 30
    while listed(docker_lab, spec) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert listed(docker_lab, spec) == []  # --rm removed it


def test_gpus_value_is_parsed_by_the_docker_cli(docker_lab: HarnessLab) -> None:
    # The devices do not exist (and here there is no NVIDIA runtime at all): the daemon
    # refuses the request, which proves the client parsed the quoted multi-device value.
    # Unquoted, the client itself rejects it ("invalid argument ... for --gpus").
    value = docker.gpus_value(["GPU-a", "MIG-b"])
    done = docker_lab.lab.docker("run", "--rm", "--gpus", value, docker_lab.image.tag, "true",
                                 check=False)
    assert done.returncode == 125
    assert "Error response from daemon" in done.stderr, done.stderr
    assert "invalid argument" not in done.stderr

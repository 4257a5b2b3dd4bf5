"""Deploying Triton for a workload, without a docker daemon: the server container's argv,
the readiness probe and its deadline, the model repository arguments, and the order of
what runs on a host (the server is removed also when the workload fails or is
interrupted)."""

from __future__ import annotations

import http.server
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from vgpu.bench.triton import (
    NotReady,
    TritonSetup,
    deployed,
    gpu_devices,
    repository_args,
    server_hosts,
    wait_ready,
)
from vgpu.bench.workload import BenchOverrides, EffectiveWorkload, effective_workload
from vgpu.container.docker import DockerCli
from vgpu.container.triton import (
    TritonPorts,
    TritonServerSpec,
    free_ports_command,
    parse_ports,
    pull_command,
    ready_command,
    run_argv,
)
from vgpu.model.scenario import InferenceWorkload
from vgpu.remote.hostlog import HostLog
from vgpu.remote.redact import Redactor
from vgpu.remote.transport import CommandResult, RemoteProcess, SudoSettings, Transport
from vgpu.targets.containers import ContainerLaunch
from vgpu.targets.target import Target

LAB = DockerCli(host="unix:///tmp/lab.sock")


def _spec(**fields: object) -> TritonServerSpec:
    values: dict[str, object] = {"image": "nvcr.io/nvidia/tritonserver:24.10-py3",
                                 "session": "abc123", "host": "gpu-node-1",
                                 "repository": "/home/lab/.vgpu/bench/triton-abc123/repo",
                                 "ports": TritonPorts(18000, 18001, 18002)}
    values.update(fields)
    return TritonServerSpec(**values)  # type: ignore[arg-type]


def test_the_server_runs_detached_on_the_host_network_with_its_gpus_and_repository() -> None:
    argv = run_argv(_spec(devices=("MIG-1", "MIG-2")), LAB)
    assert argv[:5] == ["docker", "-H", "unix:///tmp/lab.sock", "run", "-d"]
    assert argv[argv.index("--name") + 1] == "vgpu-triton-abc123-gpu-node-1"
    assert "--network=host" in argv and "--rm" not in argv
    assert argv[argv.index("--gpus") + 1] == '"device=MIG-1,MIG-2"'
    assert argv[argv.index("-v") + 1] == "/home/lab/.vgpu/bench/triton-abc123/repo:/models:ro"
    image = argv.index("nvcr.io/nvidia/tritonserver:24.10-py3")
    assert argv[image + 1:] == ["tritonserver", "--model-repository=/models",
                                "--http-port=18000", "--grpc-port=18001",
                                "--metrics-port=18002"]
    assert "--gpus" not in run_argv(_spec(), LAB)
    assert _spec().grpc_url == "127.0.0.1:18001"


def test_a_relative_repository_and_odd_host_names_are_handled() -> None:
    with pytest.raises(ValueError, match="absolute"):
        _spec(repository="repo")
    name = _spec(host="vm 1/a").name
    assert name.startswith("vgpu-triton-abc123-vm-1-a-") and " " not in name


def test_the_image_is_pulled_only_when_the_daemon_lacks_it() -> None:
    command = pull_command("img:1", LAB)
    assert command.startswith("docker -H unix:///tmp/lab.sock image inspect img:1")
    assert "|| docker -H unix:///tmp/lab.sock pull -q img:1" in command


class _Health(http.server.BaseHTTPRequestHandler):
    status = 503

    def do_GET(self) -> None:
        code = self.status if self.path == "/v2/health/ready" else 404
        self.send_response(code)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def health() -> Iterator[tuple[int, type[_Health]]]:
    handler = type("Health", (_Health,), {})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], handler
    finally:
        server.shutdown()
        server.server_close()


def _fake_docker(folder: Path, state: str | None) -> DockerCli:
    """A docker CLI whose `inspect` prints ``state`` (None: no such container)."""
    script = folder / "docker"
    body = f"echo {state}" if state else "echo 'No such object' >&2; exit 1"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return DockerCli(binary=str(script))


@pytest.mark.parametrize(("status", "state", "expected"), [
    (200, "running", "ready"), (503, "running", "running"), (503, "exited", "exited"),
    (200, "exited", "exited"), (503, None, "gone")])
def test_the_ready_probe_asks_the_health_endpoint_then_the_container(
        health: tuple[int, type[_Health]], tmp_path: Path, status: int, state: str | None,
        expected: str) -> None:
    port, handler = health
    handler.status = status
    spec = _spec(ports=TritonPorts(port, port + 1, port + 2))
    command = ready_command(spec, shlex.quote(sys.executable), _fake_docker(tmp_path, state))
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=30,
                          check=False)
    assert done.stdout.split()[-1] == expected


def test_three_free_ports_are_found_on_the_host() -> None:
    command = free_ports_command(shlex.quote(sys.executable))
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=30,
                          check=True)
    ports = parse_ports(done.stdout)
    assert len({ports.http, ports.grpc, ports.metrics}) == 3
    assert all(0 < port < 65536 for port in (ports.http, ports.grpc, ports.metrics))


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_wait_ready_returns_once_ready_and_fails_fast_or_at_the_deadline() -> None:
    clock = _Clock()
    states = iter(["created", "running", "running", "ready"])
    assert wait_ready(lambda: next(states), 60, clock.time, clock.sleep) == pytest.approx(1.5)
    assert clock.sleeps == [0.5, 0.5, 0.5]
    clock = _Clock()
    with pytest.raises(NotReady, match="container is exited"):
        wait_ready(lambda: "exited", 60, clock.time, clock.sleep)
    assert clock.sleeps == []
    clock = _Clock()
    with pytest.raises(NotReady, match="not ready after 5 s"):
        wait_ready(lambda: "running", 5, clock.time, clock.sleep)
    assert 10 <= len(clock.sleeps) <= 12


def _workload(batch: int = 8) -> EffectiveWorkload:
    workload = InferenceWorkload(model="resnet50", variant="tiny", backend="triton",
                                 batch=batch, cpu_duration_s=3)
    return effective_workload(workload, on_cpu=True, overrides=BenchOverrides())


def test_repository_arguments_follow_the_workload_and_the_image() -> None:
    workload = _workload(batch=16)
    python = repository_args(workload, "python", "cpu", 2)
    assert python == ["triton-repo", "--model", "resnet50", "--precision", "fp32", "--kind",
                      "python", "--max-batch-size", "16", "--variant", "tiny",
                      "--threads", "2"]
    gpu = repository_args(workload, "onnxruntime", "gpu", None)
    assert "--device" not in gpu and "--threads" not in gpu
    cpu = repository_args(workload, "onnxruntime", "cpu", None)
    assert cpu[cpu.index("--device") + 1] == "cpu"


class _Transport(Transport):
    """Answers commands from a script; records each one."""

    def __init__(self, name: str, answers: dict[str, str]) -> None:
        super().__init__(name, SudoSettings(), HostLog(None, Redactor()))
        self.answers = answers
        self.commands: list[str] = []

    def _execute(self, command: str, stdin: bytes | None, timeout: float | None
                 ) -> CommandResult:
        self.commands.append(command)
        for marker, out in self.answers.items():
            if marker in command:
                return CommandResult(command, 0, out, "", 0.0)
        return CommandResult(command, 0, "", "", 0.0)

    def _write_file(self, data: bytes, remote_path: str, mode: int) -> None:
        raise AssertionError("not used")

    def get(self, remote_path: str, local_path: Path) -> None:
        raise AssertionError("not used")

    def open_process(self, command: str) -> RemoteProcess:
        raise AssertionError("not used")

    def close(self) -> None:
        return None


def _target(name: str, transport: Transport, device: dict[str, object],
            container: ContainerLaunch | None = None) -> Target:
    return Target(instance=name, transport=transport, harness="/venv/bin/python -m loadgen",
                  work_root="/home/lab/.vgpu/bench", device=device, device_label=name,
                  target_kind="vm", threads=2, container=container)


def test_targets_are_grouped_per_host_with_the_gpus_their_instances_use() -> None:
    one, two = _Transport("vm-1", {}), _Transport("vm-2", {})
    launch = ContainerLaunch(image="vgpu-harness:1", session="s", devices=("GPU-b",))
    targets = [_target("a", one, {"kind": "gpu", "index": 0}),
               _target("b", two, {"kind": "gpu", "index": 0}, launch),
               _target("c", one, {"kind": "mig", "uuid": "MIG-c"}),
               _target("d", one, {"kind": "cpu"})]
    hosts = server_hosts(targets)
    assert [(h.host, [t.instance for t in h.targets]) for h in hosts] == [
        ("vm-1", ["a", "c", "d"]), ("vm-2", ["b"])]
    assert gpu_devices(hosts[0].targets) == ("0", "MIG-c")
    assert gpu_devices(hosts[1].targets) == ("GPU-b",)


GPU_IMAGE = {"--entrypoint ls": "onnxruntime\npython\n", "socket.socket": "18000 18001 18002\n",
             "v2/health/ready": "ready\n"}


def _deploy(transport: _Transport, tmp_path: Path, error: BaseException | None = None
            ) -> list[str]:
    targets = [_target("vm-1", transport, {"kind": "gpu", "index": 0})]
    setup = TritonSetup(image="nvcr.io/nvidia/tritonserver:24.10-py3", cli=LAB)
    phases: list[str] = []
    with deployed(targets, _workload(), setup, "s1", tmp_path, phases.append) as hosts:
        assert hosts[0].spec is not None and hosts[0].spec.grpc_url == "127.0.0.1:18001"
        if error is not None:
            raise error
    return phases


def test_a_host_gets_image_repository_server_and_readiness_then_removal(
        tmp_path: Path) -> None:
    transport = _Transport("vm-1", GPU_IMAGE)
    _deploy(transport, tmp_path)
    steps = [c.split()[3] if c.startswith("docker") else c.split()[0]
             for c in transport.commands]
    assert steps == ["image", "run", "mkdir", "/venv/bin/python", "python3", "run",
                     "state=$(docker", "logs", "rm", "rm"]
    repo = next(c for c in transport.commands if "triton-repo" in c)
    assert "--kind onnxruntime" in repo and "--out /home/lab/.vgpu/bench/triton-s1/repo" in repo
    start = next(c for c in transport.commands if " run -d " in c)
    assert "--gpus '\"device=0\"'" in start and "--grpc-port=18001" in start
    assert transport.commands[-2].startswith("docker -H unix:///tmp/lab.sock rm -f "
                                             "vgpu-triton-s1-vm-1")
    assert transport.commands[-1].startswith("rm -rf /home/lab/.vgpu/bench/triton-s1")
    assert (tmp_path / "triton-vm-1.log").exists()


@pytest.mark.parametrize("error", [RuntimeError("round failed"), KeyboardInterrupt()])
def test_the_server_is_removed_when_the_workload_fails_or_is_interrupted(
        tmp_path: Path, error: BaseException) -> None:
    transport = _Transport("vm-1", GPU_IMAGE)
    with pytest.raises(type(error)):
        _deploy(transport, tmp_path, error)
    assert any(" rm -f vgpu-triton-s1-vm-1" in c for c in transport.commands)


def test_a_server_that_exits_fails_with_its_log_and_is_removed(tmp_path: Path) -> None:
    transport = _Transport("vm-1", {**GPU_IMAGE, "v2/health/ready": "exited\n",
                                    " logs ": "E0101 model failed to load: bad config\n"})
    with pytest.raises(NotReady, match=r"(?s)container is exited.*bad config"):
        _deploy(transport, tmp_path)
    assert any(" rm -f vgpu-triton-s1-vm-1" in c for c in transport.commands)


def test_an_image_without_triton_backends_is_refused(tmp_path: Path) -> None:
    transport = _Transport("vm-1", {"--entrypoint ls": "tensorflow\n"})
    with pytest.raises(Exception, match="neither the onnxruntime nor the python backend"):
        _deploy(transport, tmp_path)
    assert not any(" run -d " in c for c in transport.commands)

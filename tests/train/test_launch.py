"""The launcher on this machine: failures end every node's ranks, failed ranks are
reported, the allreduce probe runs, and preflight refuses what cannot work."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from loadgen.contract import TrainRunSpec
from vgpu.errors import InputError, PlanError, RemoteError
from vgpu.remote.local import LocalTransport
from vgpu.train import preflight
from vgpu.train.launch import PID_FILE, Launch, TrainNode, run_launch, torchrun_command

torch = pytest.importorskip("torch", reason="the train extra (torch) is not installed")


pytestmark = pytest.mark.train

TINY = {
    "schema_version": 1, "model": "resnet-tiny", "image_size": 16, "batch_size": 4,
    "warmup_steps": 1, "measured_steps": 3, "comm_probe_steps": 0,
}


def _node(tmp_path: Path, name: str, python: str = sys.executable, **kw: object) -> TrainNode:
    return TrainNode(name=name, shell=LocalTransport(), address="127.0.0.1",
                     workdir=str(tmp_path / name), python=python, **kw)  # type: ignore[arg-type]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_command_sets_rendezvous_and_comm_environment(tmp_path: Path) -> None:
    nodes = [_node(tmp_path, "a"), _node(tmp_path, "b")]
    launch = Launch(nodes, 2, "train", TINY, master_port=29611,
                    comm_env={"GLOO_SOCKET_IFNAME": "eth1"})
    second = torchrun_command(launch, 1)
    assert "--nnodes 2 --node-rank 1 --master-addr 127.0.0.1 --master-port 29611" in second
    assert "--nproc-per-node 2" in second and "GLOO_SOCKET_IFNAME=eth1" in second
    assert "--standalone" in torchrun_command(Launch(nodes[:1], 2, "train", TINY), 0)


@pytest.mark.slow
def test_a_failing_node_ends_the_waiting_one(tmp_path: Path) -> None:
    waiting = _node(tmp_path, "first")
    broken = _node(tmp_path, "second", python=str(tmp_path / "no-such-python"))
    launch = Launch([waiting, broken], 1, "train", TINY, master_port=_free_port(),
                    timeout_s=120)
    started = time.monotonic()
    with pytest.raises(RemoteError, match="no-such-python"):
        run_launch(launch, tmp_path / "out")
    # The first node would wait for its peer until the rendezvous times out (minutes);
    # the launcher ended its process group instead.
    assert time.monotonic() - started < 60
    assert not (Path(waiting.workdir) / PID_FILE).exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="gpu: needs a machine without a GPU")
def test_rank_failure_comes_back_as_a_failed_record(tmp_path: Path) -> None:
    spec = {**TINY, "device": "gpu", "backend": "gloo"}
    outcome = run_launch(Launch([_node(tmp_path, "n")], 2, "train", spec), tmp_path / "out")
    assert outcome.record["status"] == "failed"
    assert "torch.cuda.is_available() is False" in outcome.record["reason"]
    assert outcome.nodes[0].exit_code != 0


ROOT = Path(__file__).resolve().parents[2]
GPU_ERROR = "DeviceUnavailable: device gpu requested but torch.cuda.is_available() is False"
# Loaded by every Python process of the node through PYTHONPATH; acts in torchrun's ranks
# only (they have RANK). A rank starts once <dir>/start-rank<N> exists: one that never may
# start is held until torchrun ends it, as a rank still busy when another one fails. With
# <dir>/barrier, a rank about to exit waits until every rank has come that far, so all of
# them have reported their failure before torchrun ends any.
RANK_ORDER_HOOK = """
import atexit, os, time
from pathlib import Path

if "RANK" in os.environ and "RANK_ORDER_DIR" in os.environ:
    gates = Path(os.environ["RANK_ORDER_DIR"])
    rank, world = os.environ["RANK"], int(os.environ["WORLD_SIZE"])
    while not (gates / f"start-rank{rank}").exists():
        time.sleep(0.05)

    def _barrier() -> None:
        (gates / f"exiting-rank{rank}").touch()
        deadline = time.monotonic() + 60
        while len(list(gates.glob("exiting-rank*"))) < world and time.monotonic() < deadline:
            time.sleep(0.05)

    if (gates / "barrier").exists():
        atexit.register(_barrier)
"""


def _ordered_node(tmp_path: Path, starting: tuple[int, ...], barrier: bool) -> TrainNode:
    hooks, gates = tmp_path / "hooks", tmp_path / "gates"
    hooks.mkdir()
    gates.mkdir()
    (hooks / "sitecustomize.py").write_text(RANK_ORDER_HOOK)
    for rank in starting:
        (gates / f"start-rank{rank}").touch()
    if barrier:
        (gates / "barrier").touch()
    path = os.pathsep.join(filter(None, [str(hooks), str(ROOT), os.environ.get("PYTHONPATH")]))
    return _node(tmp_path, "n", env={"PYTHONPATH": path, "RANK_ORDER_DIR": str(gates)})


@pytest.mark.skipif(torch.cuda.is_available(), reason="gpu: needs a machine without a GPU")
@pytest.mark.parametrize(("starting", "barrier", "reporting"), [
    ((0,), False, (0,)),       # rank 0 fails first; rank 1 is ended unreported
    ((1,), False, (1,)),       # rank 1 fails first; rank 0 is ended before its record
    ((0, 1), True, (0, 1)),    # both fail and report before either is ended
], ids=["rank-0-first", "rank-1-first", "both"])
def test_a_failed_launch_is_a_failed_record_whatever_rank_fails_first(
        tmp_path: Path, starting: tuple[int, ...], barrier: bool,
        reporting: tuple[int, ...]) -> None:
    spec = {**TINY, "device": "gpu", "backend": "gloo"}
    node = _ordered_node(tmp_path, starting, barrier)
    outcome = run_launch(Launch([node], 2, "train", spec, timeout_s=120), tmp_path / "out")
    record = outcome.record
    assert record["status"] == "failed"
    assert record["reason"] == "; ".join(f"n rank {rank}: {GPU_ERROR}" for rank in reporting)
    assert record["kind"] == "train" and record["spec"].items() >= spec.items()
    assert outcome.nodes[0].exit_code not in (0, None)
    saved = json.loads((tmp_path / "out" / "result.json").read_text())
    assert saved == record


@pytest.mark.slow
def test_allreduce_probe_reports_nccl_tests_bus_bandwidth(tmp_path: Path) -> None:
    spec = {"schema_version": 1, "sizes_bytes": [4096, 262144], "iterations": 3,
            "warmup_iterations": 1}
    record = run_launch(Launch([_node(tmp_path, "n")], 3, "allreduce", spec),
                        tmp_path / "out").record
    assert record["status"] == "ok" and record["world_size"] == 3
    assert [row["size_bytes"] for row in record["rows"]] == [4096, 262144]
    for row in record["rows"]:
        assert len(row["time_us_per_rank"]) == 3
        assert row["time_us"] == pytest.approx(max(row["time_us_per_rank"]))
        algbw = row["size_bytes"] / (row["time_us"] * 1e-6) / 1e9
        assert row["algbw_gb_s"] == pytest.approx(algbw)
        assert row["busbw_gb_s"] == pytest.approx(algbw * 2 * 2 / 3)


def test_more_nodes_than_the_inventory_gives_is_a_plan_error(tmp_path: Path) -> None:
    nodes = [_node(tmp_path, "a"), _node(tmp_path, "b")]
    with pytest.raises(PlanError) as caught:
        preflight.select_nodes(nodes, 4, "scenarios/x.yaml", "workloads[0].nodes")
    text = str(caught.value)
    assert "scenarios/x.yaml workloads[0].nodes" in text and "inventory gives 2 (a, b)" in text


def test_too_few_gpus_per_node_is_a_plan_error(tmp_path: Path) -> None:
    nodes = [_node(tmp_path, "a", gpus=2), _node(tmp_path, "b", gpus=1)]
    with pytest.raises(PlanError, match="2 GPU\\(s\\) per node requested but b has 1"):
        preflight.check_gpus(nodes, 2, "x.yaml", "workloads[0].gpus_per_node")


def test_batch_that_does_not_fit_names_the_largest_that_does(tmp_path: Path) -> None:
    slice_10gb = _node(tmp_path, "vm-1", gpus=1, memory_bytes=10 * 2**30)
    spec = TrainRunSpec(model="resnet50", image_size=224, batch_size=1024, precision="fp16")
    with pytest.raises(InputError) as caught:
        preflight.check_memory([slice_10gb], spec, 1, True, "x.yaml",
                               "workloads[0].batch_per_gpu")
    text = str(caught.value)
    assert "x.yaml workloads[0].batch_per_gpu" in text and "vm-1 has 10.0 GiB" in text
    largest = int(text.split("use a batch of at most ")[1].rstrip(")"))
    assert 0 < largest < 1024
    preflight.check_memory([slice_10gb], replace(spec, batch_size=largest), 1, True, "x.yaml",
                           "workloads[0].batch_per_gpu")  # the suggested batch passes


def test_cpu_ranks_share_host_memory(tmp_path: Path) -> None:
    host = _node(tmp_path, "h", memory_bytes=8 * 2**30)
    spec = TrainRunSpec(model="resnet50", image_size=224, batch_size=32, precision="fp32")
    preflight.check_memory([host], spec, 1, False, "x.yaml", "f")
    with pytest.raises(InputError, match="4 ranks share it"):
        preflight.check_memory([host], spec, 4, False, "x.yaml", "f")


def test_bad_spec_on_a_node_is_an_input_error_before_launch(tmp_path: Path) -> None:
    launch = Launch([_node(tmp_path, "n")], 1, "train", {**TINY, "batch_size": 0})
    with pytest.raises(InputError, match="node n: the harness rejected the training spec"):
        preflight.check_nodes_ready(launch, "x.yaml")


DRIVER = """
import sys
from pathlib import Path
from vgpu.remote.local import LocalTransport
from vgpu.train.launch import Launch, TrainNode, run_launch
node = TrainNode(name="n", shell=LocalTransport(), address="127.0.0.1", workdir=sys.argv[1],
                 python=sys.executable)
# Long enough to be interrupted, short enough to end on its own (about a minute) should
# this test itself be killed before it can clean up.
spec = {"schema_version": 1, "model": "resnet-tiny", "image_size": 16, "batch_size": 4,
        "warmup_steps": 1, "measured_steps": 1500, "comm_probe_steps": 0}
run_launch(Launch([node], 2, "train", spec), Path(sys.argv[1]) / "local-out")
"""


@pytest.mark.slow
@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_ctrl_c_or_sigterm_ends_every_rank(tmp_path: Path, signal_name: str) -> None:
    import contextlib
    import signal
    import subprocess

    workdir = tmp_path / "node"
    # SIGINT back to default in the child: a test run started in the background inherits
    # it as ignored, and Python then never raises KeyboardInterrupt.
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(workdir)],
                              stderr=subprocess.PIPE, text=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    pid_file = workdir / PID_FILE
    group: int | None = None
    try:
        deadline = time.monotonic() + 180
        while not (pid_file.exists() and pid_file.read_text().strip()):
            assert driver.poll() is None, driver.stderr.read() if driver.stderr else ""
            assert time.monotonic() < deadline, "torchrun never started"
            time.sleep(0.2)
        group = int(pid_file.read_text())
        time.sleep(3)  # let the ranks get going
        driver.send_signal(getattr(signal, signal_name))
        _, stderr = driver.communicate(timeout=120)
        assert driver.returncode != 0 and "KeyboardInterrupt" in stderr
        with pytest.raises(ProcessLookupError):
            os.killpg(group, 0)
        assert not pid_file.exists()
    finally:  # whatever failed above, leave nothing running
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        if group is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)


# Rank 1 aborts (SIGABRT, as Gloo does when a peer's connection resets during set-up) in
# the launch's first <limit> starts: <dir>/starts counts them.
ABORT_HOOK = """
import os
from pathlib import Path

if os.environ.get("RANK") == "1" and "ABORT_DIR" in os.environ:
    starts = Path(os.environ["ABORT_DIR"]) / "starts"
    count = len(starts.read_text()) if starts.exists() else 0
    starts.write_text("x" * (count + 1))
    if count < int(os.environ["ABORT_LIMIT"]):
        os.abort()
"""


def _aborting_node(tmp_path: Path, limit: int) -> TrainNode:
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(ABORT_HOOK)
    path = os.pathsep.join(filter(None, [str(hooks), str(ROOT), os.environ.get("PYTHONPATH")]))
    return _node(tmp_path, "n", env={"PYTHONPATH": path, "ABORT_DIR": str(tmp_path),
                                     "ABORT_LIMIT": str(limit)})


@pytest.mark.slow
def test_a_rank_that_crashes_once_is_started_again_and_the_record_says_so(
        tmp_path: Path) -> None:
    node = _aborting_node(tmp_path, limit=1)
    outcome = run_launch(Launch([node], 2, "train", TINY, timeout_s=120), tmp_path / "out")
    assert outcome.record["status"] == "ok", outcome.record.get("reason")
    assert outcome.record["world_size"] == 2
    assert "SIGABRT" in outcome.record["relaunched_after"]
    assert (tmp_path / "starts").read_text() == "xx"


@pytest.mark.slow
def test_a_rank_that_crashes_again_fails_the_launch_naming_the_crash(tmp_path: Path) -> None:
    node = _aborting_node(tmp_path, limit=2)
    with pytest.raises(RemoteError, match="SIGABRT"):
        run_launch(Launch([node], 2, "train", TINY, timeout_s=120), tmp_path / "out")
    assert (tmp_path / "starts").read_text() == "xx"  # started twice, not more

"""Start torchrun on every node, wait, collect rank 0's result, tear down on failure.

Each node runs ``python -m torch.distributed.run ... -m loadgen.train <command>`` in its
own process group (``setsid``) whose id is written to ``<workdir>/launch.pid``, so a
straggler can be ended on that node by group id when another node failed or on Ctrl-C.
Rendezvous is torchrun's static one on the first node's address and the configured port;
a single node uses ``--standalone`` (a free port chosen by torchrun)."""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import signal
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadgen.contract import TRAINING_SCHEMA_VERSION
from vgpu.errors import RemoteError
from vgpu.train.shell import NodeShell, ShellResult

PID_FILE = "launch.pid"
SPEC_FILE = "spec.json"
OUT_DIR = "out"
TEARDOWN_GRACE_S = 5
PID_WAIT_S = 10  # a node torn down right after its start may not have written its pid yet


@dataclass(frozen=True)
class TrainNode:
    """One node: how to run commands on it and how the other nodes reach it."""

    name: str
    shell: NodeShell
    address: str
    workdir: str
    python: str = "python3"
    gpus: int = 0
    memory_bytes: int | None = None  # per-GPU memory with GPUs, else host memory
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Launch:
    nodes: Sequence[TrainNode]
    procs_per_node: int
    command: str  # "train" or "allreduce"
    spec: Mapping[str, Any]
    master_port: int = 29500
    comm_env: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 3600.0


@dataclass(frozen=True)
class NodeOutcome:
    node: str
    exit_code: int | None  # None: torn down or never finished
    stdout: str
    stderr: str


@dataclass(frozen=True)
class LaunchOutcome:
    record: dict[str, Any]
    nodes: list[NodeOutcome]


def run_bash(node: TrainNode, command: str, timeout: float | None) -> ShellResult:
    """Runs ``command`` under bash on the node, whatever shell its transport uses."""
    return node.shell.run(f"bash -c {shlex.quote(command)}", timeout=timeout)


def _path(node: TrainNode, *parts: str) -> str:
    return "/".join([node.workdir.rstrip("/"), *parts])


def torchrun_command(launch: Launch, rank: int) -> str:
    """The full shell command for node ``rank`` (0 hosts the rendezvous)."""
    node = launch.nodes[rank]
    if len(launch.nodes) == 1:
        topology = ["--standalone", "--nnodes", "1"]
    else:
        topology = [
            "--nnodes", str(len(launch.nodes)), "--node-rank", str(rank),
            "--master-addr", launch.nodes[0].address, "--master-port", str(launch.master_port),
        ]
    torchrun = [
        node.python, "-m", "torch.distributed.run", *topology,
        "--nproc-per-node", str(launch.procs_per_node),
        "-m", "loadgen.train", launch.command, _path(node, SPEC_FILE),
        "--out", _path(node, OUT_DIR),
    ]
    env = {**launch.comm_env, **node.env}
    env.setdefault("PYTHONFAULTHANDLER", "1")  # a rank that crashes prints where it was
    if "OMP_NUM_THREADS" not in env and node.gpus == 0:
        env["OMP_NUM_THREADS"] = "1"  # torchrun would pick 1 anyway, but say it
    exports = " ".join(f"{key}={shlex.quote(value)}" for key, value in sorted(env.items()))
    pid_file = shlex.quote(_path(node, PID_FILE))
    inner = f"echo $$ > {pid_file}; exec {shlex.join(torchrun)}"
    prefix = f"env {exports} " if exports else ""
    # The pid file lives exactly as long as the process group, so a teardown never
    # signals a group id that has since been reused.
    return (
        f"cd {shlex.quote(node.workdir)} && rm -rf {shlex.quote(_path(node, OUT_DIR))} "
        f"{pid_file} && {prefix}setsid --wait bash -c {shlex.quote(inner)}; "
        f"rc=$?; rm -f {pid_file}; exit $rc"
    )


def stage_spec(node: TrainNode, spec: Mapping[str, Any]) -> None:
    text = json.dumps(dict(spec), indent=2, sort_keys=True)
    command = (
        f"mkdir -p {shlex.quote(node.workdir)} && "
        f"cat > {shlex.quote(_path(node, SPEC_FILE))} <<'VGPU_SPEC_EOF'\n{text}\nVGPU_SPEC_EOF"
    )
    done = run_bash(node, command, timeout=60)
    if done.exit_code != 0:
        raise RemoteError(f"{node.name}: cannot write {_path(node, SPEC_FILE)}: {done.stderr}")


def teardown(node: TrainNode) -> None:
    """End the node's torchrun process group: TERM, a grace period, then KILL."""
    pid_file = shlex.quote(_path(node, PID_FILE))
    run_bash(
        node,
        f"for _ in $(seq {PID_WAIT_S * 10}); do test -s {pid_file} && break; sleep 0.1; done; "
        f"test -s {pid_file} || exit 0; pgid=$(cat {pid_file}); "
        f"kill -TERM -- -$pgid 2>/dev/null || exit 0; "
        f"for _ in $(seq {TEARDOWN_GRACE_S * 10}); do "
        f"kill -0 -- -$pgid 2>/dev/null || exit 0; sleep 0.1; done; "
        f"kill -KILL -- -$pgid 2>/dev/null; exit 0",
        timeout=PID_WAIT_S + TEARDOWN_GRACE_S + 30,
    )


def _read_json(node: TrainNode, path: str) -> dict[str, Any] | None:
    done = run_bash(node, f"cat {shlex.quote(path)} 2>/dev/null", timeout=60)
    if done.exit_code != 0 or not done.stdout.strip():
        return None
    try:
        data = json.loads(done.stdout)
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def _rank_failures(node: TrainNode) -> list[str]:
    out = shlex.quote(_path(node, OUT_DIR))
    done = run_bash(node, f"cat {out}/rank*.failed.json 2>/dev/null | head -c 65536", 60)
    reasons = []
    decoder = json.JSONDecoder()
    text = done.stdout.strip()
    while text:
        try:
            item, end = decoder.raw_decode(text)
        except json.JSONDecodeError:
            break
        reasons.append(f"{node.name} rank {item.get('rank')}: {item.get('reason')}")
        text = text[end:].strip()
    return reasons


def _failed_record(launch: Launch) -> dict[str, Any]:
    """The record rank 0 would have written for a failed run; the caller adds the reason."""
    return {"schema_version": TRAINING_SCHEMA_VERSION, "kind": launch.command,
            "status": "failed", "reason": "", "spec": dict(launch.spec),
            "host": launch.nodes[0].name, "harness_version": None, "written_by": "launcher",
            "written_unix": time.time()}


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _wait_all(
    launch: Launch, futures: dict[Future[ShellResult], int]
) -> dict[int, ShellResult | BaseException]:
    """Waits for every node; the first failure ends the others."""
    finished: dict[int, ShellResult | BaseException] = {}
    pending = set(futures)
    torn_down = False
    while pending:
        done, pending = wait(pending, return_when=FIRST_COMPLETED)
        for future in done:
            rank = futures[future]
            error = future.exception()
            finished[rank] = error if error is not None else future.result()
            if error is not None:  # e.g. a timeout: its own process group may live on
                teardown(launch.nodes[rank])
            failed = error is not None or future.result().exit_code != 0
            if failed and not torn_down and pending:
                torn_down = True
                _teardown_all([launch.nodes[futures[other]] for other in pending])
    return finished


def run_launch(launch: Launch, local_out: Path) -> LaunchOutcome:
    """Runs the launch to the end. Returns rank 0's record, also written to
    ``local_out/result.json``: failed, naming every rank's reported failure, whichever rank
    failed first. A launch whose ranks died of a signal without a record or a reported
    failure (Gloo aborts when a peer's connection resets while it is being set up) is
    started once more, and the record says so (``relaunched_after``). Raises RemoteError
    when no record came back and no rank reported why."""
    crashed = ""
    for attempt in (1, 2):
        outcomes, record, failures = _attempt(launch)
        if record is not None or failures:
            break
        detail = "; ".join(f"{o.node} exit {o.exit_code}: {crash_lines(o.stderr)}"
                           for o in outcomes if o.exit_code != 0)
        if attempt == 1 and any(_died_of_signal(o.stderr) for o in outcomes):
            crashed = detail
            continue
        raise RemoteError(f"{launch.command} produced no result.json on "
                          f"{launch.nodes[0].name}: {detail or 'no reason reported'}")
    if record is None:
        # Another rank failed first and rank 0 was ended before it wrote its record.
        record = _failed_record(launch)
    if failures:
        record = {**record, "status": "failed", "reason": "; ".join(failures)}
    if crashed:
        record = {**record, "relaunched_after": crashed}
    local_out.mkdir(parents=True, exist_ok=True)
    (local_out / "result.json").write_text(json.dumps(record, indent=2, sort_keys=True))
    for outcome in outcomes:
        (local_out / f"{outcome.node}.log").write_text(outcome.stdout + outcome.stderr)
    return LaunchOutcome(record=record, nodes=outcomes)


def _attempt(launch: Launch) -> tuple[list[NodeOutcome], dict[str, Any] | None, list[str]]:
    """One start of torchrun on every node: the nodes' outcomes, rank 0's record and the
    ranks' reported failures."""
    for node in launch.nodes:
        stage_spec(node, launch.spec)
    pool = ThreadPoolExecutor(max_workers=len(launch.nodes), thread_name_prefix="torchrun")
    futures = {
        pool.submit(run_bash, node, torchrun_command(launch, rank), launch.timeout_s): rank
        for rank, node in enumerate(launch.nodes)
    }
    try:
        with _terminate_as_interrupt():
            finished = _wait_all(launch, futures)
    except BaseException:  # Ctrl-C, SIGTERM or a bug: leave no rank running anywhere
        _teardown_all(launch.nodes)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    outcomes = [_outcome(launch.nodes[rank].name, finished[rank]) for rank in sorted(finished)]
    record = _read_json(launch.nodes[0], _path(launch.nodes[0], OUT_DIR, "result.json"))
    failures = [reason for node in launch.nodes for reason in _rank_failures(node)]
    return outcomes, record, failures


_SIGNAL_DEATH = re.compile(r"Signal \d+ \(SIG[A-Z]+\) received|exitcode\s*:\s*-\d+")
_CRASH_WORDS = ("terminate called", "what():", "Fatal Python error", "Segmentation fault",
                "received by PID", "Error:", "error:")


def _died_of_signal(stderr: str) -> bool:
    """torchrun's summary of a worker killed by a signal (a native crash, not an exception
    the rank reported)."""
    return bool(_SIGNAL_DEATH.search(stderr))


def crash_lines(stderr: str, limit: int = 8) -> str:
    """What a rank's death left in the log: its error lines (a C++ exception's text,
    Python's fault handler), else the log's last lines."""
    lines = [line.strip() for line in stderr.splitlines()
             if any(word in line for word in _CRASH_WORDS)]
    return " | ".join(dict.fromkeys(lines[:limit])) if lines else _tail(stderr, 5)


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (a CI timeout, `kill`) would end this process without tearing the ranks
    down; while waiting on them it is turned into KeyboardInterrupt instead."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt("SIGTERM")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _teardown_all(nodes: Sequence[TrainNode]) -> None:
    threads = [threading.Thread(target=teardown, args=(node,)) for node in nodes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _outcome(name: str, finished: ShellResult | BaseException) -> NodeOutcome:
    if isinstance(finished, BaseException):
        return NodeOutcome(name, None, "", f"{type(finished).__name__}: {finished}")
    return NodeOutcome(name, finished.exit_code, finished.stdout, finished.stderr)

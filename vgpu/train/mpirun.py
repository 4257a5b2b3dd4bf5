"""Start an MPI job: ``mpirun`` on one node (the launcher, by default the first node) over
a hostfile of the job's nodes, ``ranks_per_node`` ranks on each, every rank running
``python -m loadgen.train <command>``; wait, collect rank 0's record, end it on failure.

mpirun reaches the other nodes through its rsh agent (ssh unless told otherwise: the nodes
need passwordless SSH to each other, the same Python and the same work folder path, as
for Horovod). Ranks are not bound to cores (``--bind-to none``): each rank's
OMP_NUM_THREADS threads may then use the cores the rank's neighbours leave. As root, Open
MPI refuses to start without ``--allow-run-as-root`` and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1,
both given here when the launcher's user is root."""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vgpu.errors import RemoteError
from vgpu.train.launch import (
    OUT_DIR,
    PID_FILE,
    SPEC_FILE,
    LaunchOutcome,
    NodeOutcome,
    TrainNode,
    run_bash,
    teardown,
)
from vgpu.train.shell import ShellResult

HOSTFILE = "hostfile"
ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


@dataclass(frozen=True)
class MpiJob:
    nodes: Sequence[TrainNode]
    ranks_per_node: int
    command: str  # "train" (backend mpi) or "mpiprobe"
    spec: Mapping[str, Any]
    threads_per_rank: int
    interface: str | None = None  # Open MPI's TCP traffic kept to it (a name or a CIDR)
    env: Mapping[str, str] = field(default_factory=dict)
    launcher: TrainNode | None = None  # where mpirun runs; None: the first node
    rsh_agent: str | None = None  # how mpirun starts its daemons elsewhere; None: ssh
    timeout_s: float = 3600.0

    @property
    def world_size(self) -> int:
        return len(self.nodes) * self.ranks_per_node

    @property
    def head(self) -> TrainNode:
        return self.launcher or self.nodes[0]


def _path(node: TrainNode, *parts: str) -> str:
    return "/".join([node.workdir.rstrip("/"), *parts])


def hostfile_text(job: MpiJob) -> str:
    return "".join(f"{node.address} slots={job.ranks_per_node}\n" for node in job.nodes)


def mpirun_argv(job: MpiJob, as_root: bool) -> list[str]:
    """mpirun's arguments: the topology, the threads and environment every rank gets, the
    interface for its TCP traffic and the harness command."""
    head = job.head
    argv = ["mpirun", *(["--allow-run-as-root"] if as_root else [])]
    if len(job.nodes) == 1 and job.launcher is None:
        argv += ["--host", f"localhost:{job.ranks_per_node}"]
    else:
        argv += ["--hostfile", _path(head, HOSTFILE)]
    argv += ["-np", str(job.world_size), "--map-by", f"ppr:{job.ranks_per_node}:node",
             "--bind-to", "none"]
    # Open MPI 4.1's daemons map their hardware topology into a shared segment at the
    # "biggest hole" of their address space; with address randomisation that hole can
    # touch the stack, and about one daemon start in ten segfaulted in
    # hwloc_shmem_topology_write (mpirun then crashed too: exit 139, "no route"). The
    # ranks read the topology themselves instead.
    argv += ["--mca", "rtc_hwloc_vmhole", "none"]
    if job.rsh_agent:
        argv += ["--mca", "plm_rsh_agent", job.rsh_agent]
    if job.interface:
        argv += ["--mca", "btl_tcp_if_include", job.interface,
                 "--mca", "oob_tcp_if_include", job.interface]
    # every rank's environment: mpirun forwards only what -x names to other nodes
    env = {**head.env, **job.env, "OMP_NUM_THREADS": str(job.threads_per_rank)}
    for key, value in sorted(env.items()):
        argv += ["-x", f"{key}={value}"]
    return [*argv, head.python, "-m", "loadgen.train", job.command,
            _path(head, SPEC_FILE), "--out", _path(head, OUT_DIR)]


def mpirun_command(job: MpiJob, as_root: bool) -> str:
    """The launcher's shell command, in its own process group whose id is in the pid file
    for as long as it runs (so a teardown ends mpirun, which ends its ranks)."""
    head = job.head
    env = {**job.head.env, **(ROOT_ENV if as_root else {})}
    exports = " ".join(f"{key}={shlex.quote(value)}" for key, value in sorted(env.items()))
    pid_file = shlex.quote(_path(head, PID_FILE))
    inner = f"echo $$ > {pid_file}; exec {shlex.join(mpirun_argv(job, as_root))}"
    prefix = f"env {exports} " if exports else ""
    return (f"cd {shlex.quote(head.workdir)} && rm -rf {shlex.quote(_path(head, OUT_DIR))} "
            f"{pid_file} && {prefix}setsid --wait bash -c {shlex.quote(inner)}; "
            f"rc=$?; rm -f {pid_file}; exit $rc")


def _write(node: TrainNode, path: str, text: str) -> None:
    folder = path.rsplit("/", 1)[0]
    done = run_bash(node, f"mkdir -p {shlex.quote(folder)} && cat > {shlex.quote(path)} "
                          f"<<'VGPU_MPI_EOF'\n{text}\nVGPU_MPI_EOF", timeout=60)
    if done.exit_code != 0:
        raise RemoteError(f"{node.name}: cannot write {path}: {done.stderr.strip()}")


def stage_job(job: MpiJob) -> None:
    """The spec at the launcher's path on every node (mpirun gives each rank that path) and
    the hostfile on the launcher."""
    spec_path = _path(job.head, SPEC_FILE)
    text = json.dumps(dict(job.spec), indent=2, sort_keys=True)
    targets = {id(node): node for node in [job.head, *job.nodes]}.values()
    with ThreadPoolExecutor(max_workers=len(targets)) as pool:
        list(pool.map(lambda node: _write(node, spec_path, text), targets))
    _write(job.head, _path(job.head, HOSTFILE), hostfile_text(job).rstrip("\n"))


def is_root(node: TrainNode) -> bool:
    return run_bash(node, "id -u", timeout=60).stdout.strip() == "0"


# Open MPI's words when its daemons on the other nodes did not start or call back; the
# last is the routing layer's "internal error" text (exit 213), seen on a launch that
# followed a failed one within a second
DAEMON_START_FAILED = ("unable to reliably start one or more daemons",
                       "lost communication with a remote daemon",
                       "set the MCA param routed=direct")
MPIRUN_CRASHED = 139  # mpirun's own segfault, seen on its error path after a daemon failed
LAUNCHES = 3  # a launch whose daemons did not start is made again, this many in all
# seconds before launch N+1: the daemons a failed launch did start need time to see their
# mpirun gone and end, and a node that did not answer time to recover
RELAUNCH_PAUSE_S = (2.0, 5.0)


def run_mpi_job(job: MpiJob, local_out: Path) -> LaunchOutcome:
    """Runs the job to the end; rank 0's record (also in ``local_out/result.json``) with
    every rank's reported failure. A launch whose daemons failed to start (no rank ran) is
    made again after a pause, up to LAUNCHES in all, and the record says so
    (``relaunched_after``: the first failed launch's end; ``launches``: how many were
    made). Raises RemoteError when no record came back."""
    stage_job(job)
    head = job.head
    as_root = is_root(head)
    relaunched: list[str] = []
    for attempt in range(1, LAUNCHES + 1):
        if attempt > 1:
            time.sleep(RELAUNCH_PAUSE_S[min(attempt - 2, len(RELAUNCH_PAUSE_S) - 1)])
        done, read, failures = _attempt(job, as_root)
        if read.exit_code == 0 and read.stdout.strip():
            break
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-8:])
        if attempt < LAUNCHES and not failures and _daemons_did_not_start(done):
            relaunched.append(f"mpirun exit {done.exit_code}: {tail[-500:]}")
            continue
        again = (f", started again after {len(relaunched)} failed launch(es), the first: "
                 f"{relaunched[0][:200]}") if relaunched else ""
        raise RemoteError(f"mpirun {job.command} on {head.name} (exit {done.exit_code}, "
                          f"launch {attempt} of {LAUNCHES}{again}) produced no "
                          f"result.json: {failures[:2000] or tail}")
    record: dict[str, Any] = json.loads(read.stdout)
    if done.exit_code != 0 and record.get("status") == "ok":
        record = {**record, "status": "failed", "reason": f"mpirun exit {done.exit_code}"}
    if relaunched:
        record = {**record, "relaunched_after": relaunched[0],
                  "launches": len(relaunched) + 1}
    local_out.mkdir(parents=True, exist_ok=True)
    (local_out / "result.json").write_text(json.dumps(record, indent=2, sort_keys=True))
    (local_out / f"{head.name}.log").write_text(done.stdout + done.stderr)
    outcome = NodeOutcome(head.name, done.exit_code, done.stdout, done.stderr)
    return LaunchOutcome(record=record, nodes=[outcome])


def _daemons_did_not_start(done: ShellResult) -> bool:
    log = done.stderr + done.stdout
    return (done.exit_code == MPIRUN_CRASHED
            or any(words in log for words in DAEMON_START_FAILED))


def _attempt(job: MpiJob, as_root: bool) -> tuple[ShellResult, ShellResult, str]:
    """One mpirun: its result, the read of rank 0's record and the ranks' failures."""
    head = job.head
    try:
        done = run_bash(head, mpirun_command(job, as_root), job.timeout_s)
    except BaseException:  # a timeout, Ctrl-C: mpirun ends its ranks when it is ended
        teardown(head)
        raise
    read = run_bash(job.nodes[0], f"cat {shlex.quote(_path(head, OUT_DIR, 'result.json'))}",
                    timeout=60)
    failures = run_bash(job.nodes[0], f"cat {shlex.quote(_path(head, OUT_DIR))}/rank*.failed"
                        ".json 2>/dev/null | head -c 65536", timeout=60).stdout.strip()
    return done, read, failures

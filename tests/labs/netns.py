"""A namespace lab: test nodes on network stacks of their own, joined by real, shaped links.

``NetnsLab(n)`` creates, for one test run, ``n`` network namespaces ``vgpu-<runid>-<k>``
(``runid`` is random, so two runs on one machine never share a name), a bridge in the root
namespace and one veth pair per node: the node's end is ``eth0`` inside its namespace with
the address ``10.a.b.(10+k)/24``, the other end is a port of the bridge, which holds
``10.a.b.1`` so that the orchestrator (the test process, in the root namespace) reaches
every node through it. ``shape(k, mbit)`` puts a token bucket (``tc ... tbf``) on both ends
of node k's veth: its link then carries that many Mbit/s each way, like a NIC of that speed.

Everything is removed on exit, after failures too (and at interpreter exit if a test never
reached ``__exit__``); a lab whose process was killed is swept by the next lab that starts
(its owner file under /run/vgpu-netns names a process that no longer runs). Needs root and
iproute2 (``ip``, ``tc``): ``bash scripts/setup.sh --test`` installs it.

    with NetnsLab(2) as net:
        net.shape(0, 100); net.shape(1, 100)
        subprocess.run([*net.nodes[0].exec_prefix, "ping", "-c1", net.nodes[1].address])
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from vgpu.sim.guests import free_prefix

IP = "ip"
NODE_INTERFACE = "eth0"
FIRST_NODE_OCTET = 11
OWNERS = Path("/run/vgpu-netns")
NAME_PREFIX = "vgpu-"
TBF_LATENCY = "50ms"
BURST_SECONDS = 0.002  # the bucket holds 2 ms of traffic: small enough to shape 1 MiB
MIN_BURST_BYTES = 4096


def netns_available() -> str | None:
    """None when this machine can run the lab, else the reason (for pytest.skip)."""
    if os.geteuid() != 0:
        return "the namespace lab needs root (it creates network namespaces)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"{tool} (iproute2) is missing: run `bash scripts/setup.sh --test`"
    return None


def _run(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def _quiet(*argv: str) -> None:
    subprocess.run(argv, capture_output=True, check=False)


@dataclass(frozen=True)
class NetnsNode:
    """One node: its namespace, its address there and the two ends of its link."""

    index: int
    namespace: str
    address: str
    interface: str  # inside the namespace
    host_veth: str  # the bridge port in the root namespace

    @property
    def exec_prefix(self) -> list[str]:
        """Prepend to a command to run it inside this node's namespace."""
        return [IP, "netns", "exec", self.namespace]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class NetnsLab:
    """Context manager: ``n_nodes`` namespaces on a bridge, each with its own address."""

    def __init__(self, n_nodes: int) -> None:
        if not 1 <= n_nodes <= 200:
            raise ValueError("n_nodes must be between 1 and 200")
        self.n_nodes = n_nodes
        self.run_id = secrets.token_hex(3)
        self.bridge = f"vgb{self.run_id}"
        self.prefix = ""
        self.nodes: list[NetnsNode] = []
        self._made_bridge = False
        self._closed = False

    @property
    def gateway(self) -> str:
        return f"{self.prefix}.1"

    @property
    def owner_file(self) -> Path:
        return OWNERS / self.run_id

    # ---- lifecycle -----------------------------------------------------------------------
    def __enter__(self) -> NetnsLab:
        reason = netns_available()
        if reason:
            raise RuntimeError(reason)
        sweep_stale_labs()
        OWNERS.mkdir(parents=True, exist_ok=True)
        self.owner_file.write_text(f"{os.getpid()}\n")
        atexit.register(self.close)
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _build(self) -> None:
        self.prefix = free_prefix("the namespace lab")
        _run(IP, "link", "add", self.bridge, "type", "bridge")
        self._made_bridge = True
        _run(IP, "addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        _run(IP, "link", "set", self.bridge, "up")
        for index in range(self.n_nodes):
            node = NetnsNode(
                index=index, namespace=f"{NAME_PREFIX}{self.run_id}-{index + 1}",
                address=f"{self.prefix}.{FIRST_NODE_OCTET + index}",
                interface=NODE_INTERFACE, host_veth=f"vgh{self.run_id}n{index + 1}",
            )
            _run(IP, "netns", "add", node.namespace)
            self.nodes.append(node)  # from here on close() removes it, whatever fails next
            self._wire(node, inner=f"vgi{self.run_id}n{index + 1}")

    def _wire(self, node: NetnsNode, inner: str) -> None:
        """The node's veth pair: ``eth0`` with its address inside, a bridge port outside."""
        _run(IP, "link", "add", node.host_veth, "type", "veth", "peer", "name", inner)
        _run(IP, "link", "set", inner, "netns", node.namespace)
        in_ns = (IP, "-n", node.namespace)
        _run(*in_ns, "link", "set", inner, "name", node.interface)
        _run(*in_ns, "addr", "add", f"{node.address}/24", "dev", node.interface)
        _run(*in_ns, "link", "set", node.interface, "up")
        _run(*in_ns, "link", "set", "lo", "up")
        _run(IP, "link", "set", node.host_veth, "master", self.bridge, "up")

    # ---- the links -----------------------------------------------------------------------
    def shape(self, index: int, rate_mbit: float) -> None:
        """Node ``index``'s link carries ``rate_mbit`` Mbit/s each way (tbf on both ends)."""
        node = self.nodes[index]
        burst = max(MIN_BURST_BYTES, int(rate_mbit * 1e6 / 8 * BURST_SECONDS))
        tbf = ["root", "tbf", "rate", f"{rate_mbit:g}mbit", "burst", str(burst),
               "latency", TBF_LATENCY]
        _run("tc", "qdisc", "replace", "dev", node.host_veth, *tbf)
        _run(IP, "netns", "exec", node.namespace, "tc", "qdisc", "replace", "dev",
             node.interface, *tbf)

    def shape_all(self, rate_mbit: float) -> None:
        for index in range(len(self.nodes)):
            self.shape(index, rate_mbit)

    def unshape(self, index: int) -> None:
        node = self.nodes[index]
        _quiet("tc", "qdisc", "del", "dev", node.host_veth, "root")
        _quiet(IP, "netns", "exec", node.namespace, "tc", "qdisc", "del", "dev",
               node.interface, "root")

    # ---- teardown ------------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        remove_lab(self.run_id, [node.namespace for node in self.nodes],
                   self.bridge if self._made_bridge else None)
        self.nodes.clear()
        with contextlib.suppress(ValueError):
            atexit.unregister(self.close)


def _kill_namespace_processes(namespace: str) -> None:
    """Processes still in the namespace (its sshd and their sessions, all started by the
    lab's tests) end with it."""
    done = subprocess.run([IP, "netns", "pids", namespace], capture_output=True, text=True,
                          check=False)
    for word in done.stdout.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(word), signal.SIGKILL)


def remove_lab(run_id: str, namespaces: list[str], bridge: str | None) -> None:
    """Deletes the namespaces (their veth pairs go with them), the bridge, the owner file."""
    for namespace in namespaces:
        _kill_namespace_processes(namespace)
        _quiet(IP, "netns", "del", namespace)
    if bridge is not None:
        _quiet(IP, "link", "del", bridge)
    (OWNERS / run_id).unlink(missing_ok=True)


def sweep_stale_labs() -> list[str]:
    """Removes labs whose owning process no longer runs (killed before its cleanup)."""
    if not OWNERS.is_dir():
        return []
    listed = subprocess.run([IP, "netns", "list"], capture_output=True, text=True,
                            check=False).stdout.split()
    swept = []
    for owner in OWNERS.iterdir():
        try:
            pid = int(owner.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pid = 0
        if pid and _pid_alive(pid):
            continue
        mine = [n for n in listed if n.startswith(f"{NAME_PREFIX}{owner.name}-")]
        remove_lab(owner.name, mine, f"vgb{owner.name}")
        swept.append(owner.name)
    return swept

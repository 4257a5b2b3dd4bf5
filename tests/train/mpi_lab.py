"""MPI across the namespace lab: mpirun on this machine (the root namespace, which reaches
every node through the lab's bridge) starts its daemons in the nodes' namespaces through
an rsh agent that is `ip netns exec` instead of ssh, so the ranks' traffic crosses the
nodes' shaped links."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from tests.labs.netns import NetnsLab
from vgpu.remote.local import LocalTransport
from vgpu.train.launch import TrainNode


def netns_rsh_agent(net: NetnsLab, directory: Path) -> Path:
    """A script called as ``agent HOST COMMAND...`` like ssh: the command (one shell
    string, as ssh passes it) runs in the namespace that holds HOST's address."""
    cases = "".join(f"  {node.address}) ns={shlex.quote(node.namespace)} ;;\n"
                    for node in net.nodes)
    agent = directory / "netns-rsh"
    agent.write_text(
        "#!/bin/bash\n# mpirun's rsh agent for the namespace lab\n"
        "while [[ $1 == -* ]]; do shift; done\n"  # ssh options mpirun may add
        'host=$1; shift\ncase $host in\n' + cases +
        '  *) echo "netns-rsh: no namespace for $host" >&2; exit 255 ;;\nesac\n'
        'exec ip netns exec "$ns" /bin/sh -c "$*"\n')
    agent.chmod(0o755)
    return agent


def netns_mpi_nodes(net: NetnsLab, workdir: Path) -> tuple[TrainNode, list[TrainNode]]:
    """The launcher (this machine) and one node per namespace; all share this machine's
    files, so the spec and the result are where mpirun put them."""
    launcher = TrainNode(name="launcher", shell=LocalTransport(), address=net.gateway,
                         workdir=str(workdir), python=sys.executable,
                         env={"PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    nodes = [TrainNode(name=f"node-{node.index + 1}", shell=LocalTransport(),
                       address=node.address, workdir=str(workdir), python=sys.executable)
             for node in net.nodes]
    return launcher, nodes


def lab_cidr(net: NetnsLab) -> str:
    return f"{net.prefix}.0/24"

"""Training nodes from a scenario's targets (vgpu.targets): one node per host (the targets
that share a transport). What a node has (GPUs, their memory, host memory) is asked of
torch on the node itself, since the targets describe inference devices (one per VM or MIG
slice)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from vgpu.errors import InputError
from vgpu.model.scenario import Scenario
from vgpu.results.store.records import TargetKind
from vgpu.targets.target import Target
from vgpu.train.launch import TrainNode, run_bash

if TYPE_CHECKING:
    from vgpu.site import Site

LOOPBACK = "127.0.0.1"
PROBE = (
    "import json, os, torch\n"
    "n = torch.cuda.device_count() if torch.cuda.is_available() else 0\n"
    "mem = [torch.cuda.get_device_properties(i).total_memory for i in range(n)]\n"
    "host = os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES')\n"
    "print(json.dumps({'gpus': n, 'gpu_memory': min(mem) if mem else None, 'host': host}))\n"
)


def _python_of(target: Target) -> str:
    words = shlex.split(target.harness)
    if len(words) != 3 or words[1:] != ["-m", "loadgen"]:
        raise InputError.single(
            "inventory", f"target {target.instance}",
            f"harness command '{target.harness}' is not '<python> -m loadgen'",
            fix="point the target's harness at the interpreter that has loadgen and torch",
        )
    return words[0]


def _address_of(target: Target) -> str:
    host_target = getattr(target.transport, "target", None)  # SSHTransport's HostTarget
    return str(host_target.address) if host_target is not None else LOOPBACK


def _planned_gpus(on_host: Sequence[Target]) -> int:
    """GPUs the plan gives the host's instances ("passthrough+passthrough" is two)."""
    return sum(len((t.planned_slice or "gpu").split("+")) for t in on_host
               if t.device.get("kind") in ("gpu", "mig"))


def _absolute(node: TrainNode) -> TrainNode:
    """Bench paths may be relative to where a session starts (the login home over SSH);
    the launcher changes directory, so make them absolute."""
    if node.python.startswith("/") and node.workdir.startswith("/"):
        return node
    home = run_bash(node, "pwd", timeout=60).stdout.strip()
    python = node.python if node.python.startswith("/") or "/" not in node.python \
        else f"{home}/{node.python}"
    workdir = node.workdir if node.workdir.startswith("/") else f"{home}/{node.workdir}"
    return replace(node, python=python, workdir=workdir)


def probe_node(node: TrainNode) -> TrainNode:
    """The node with the GPU count and memory torch sees there; unchanged when torch does
    not run there (the preflight then says why)."""
    done = run_bash(node, f"{shlex.quote(node.python)} -c {shlex.quote(PROBE)}", timeout=120)
    if done.exit_code != 0:
        return node
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    memory = facts["gpu_memory"] if facts["gpus"] else facts["host"]
    return replace(node, gpus=int(facts["gpus"]), memory_bytes=memory)


def nodes_from_targets(targets: Sequence[Target], probe: bool = True) -> list[TrainNode]:
    """Nodes in target order of first appearance; node 0 hosts the rendezvous."""
    hosts: dict[int, list[Target]] = {}
    for target in targets:
        hosts.setdefault(id(target.transport), []).append(target)
    nodes: list[TrainNode] = []
    for on_host in hosts.values():
        first = on_host[0]
        node = _absolute(TrainNode(
            name=first.transport.name,
            shell=first.transport,
            address=_address_of(first),
            workdir=f"{first.work_root.rstrip('/')}/train",
            python=_python_of(first),
            gpus=_planned_gpus(on_host),
            env=dict(first.env),
        ))
        nodes.append(probe_node(node) if probe else node)
    return nodes


def inventory_nodes(
    scenario: Scenario, site: Site, log_root: Path
) -> tuple[list[TrainNode], TargetKind, list[str]]:
    """The scenario's VMs (as vCenter reports them) or bare-metal hosts of the site's
    inventory, reached over SSH with the harness `vgpu provision` installed, as training
    nodes."""
    from vgpu.targets.connect import build_targets
    from vgpu.targets.placements import scenario_placements

    placements = scenario_placements(scenario, site)
    # Training checks its devices through torch on every node (probe_node), not through
    # ONNX Runtime's providers, so the inference harness's GPU-provider rule is not applied.
    targets, notes = build_targets(placements, log_root, allow_cpu=True)
    kind: TargetKind = "vm" if scenario.platform == "vsphere" else "bare-metal"
    return nodes_from_targets(targets), kind, notes

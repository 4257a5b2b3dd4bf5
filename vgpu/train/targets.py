"""Training nodes from `vgpu bench` targets: one node per host (the targets that share a
transport), with as many GPUs as that host has GPU targets."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

from vgpu.errors import InputError
from vgpu.train.launch import TrainNode

if TYPE_CHECKING:  # vgpu.bench may import vgpu.train: no import cycle at run time
    from vgpu.bench.targets import Target

LOOPBACK = "127.0.0.1"


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


def nodes_from_targets(targets: Sequence[Target]) -> list[TrainNode]:
    """Nodes in target order of first appearance; node 0 hosts the rendezvous."""
    hosts: dict[int, list[Target]] = {}
    for target in targets:
        hosts.setdefault(id(target.transport), []).append(target)
    nodes: list[TrainNode] = []
    for on_host in hosts.values():
        first = on_host[0]
        gpus = sum(1 for t in on_host if t.device.get("kind") in ("gpu", "mig"))
        nodes.append(TrainNode(
            name=first.transport.name,
            shell=first.transport,
            address=_address_of(first),
            workdir=f"{first.work_root.rstrip('/')}/train",
            python=_python_of(first),
            gpus=gpus,
            env=dict(first.env),
        ))
    return nodes

"""Bench targets (one per GPU or VM) become training nodes (one per host)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from vgpu.bench.targets import Target
from vgpu.errors import InputError
from vgpu.provision.local import LocalTransport
from vgpu.train.targets import nodes_from_targets


def _target(name: str, transport: LocalTransport, kind: str, root: Path,
            harness: str = f"{sys.executable} -m loadgen") -> Target:
    return Target(instance=name, transport=transport, harness=harness, work_root=str(root),
                  device={"kind": kind}, device_label=kind, target_kind="vm",
                  env={"PYTHONPATH": "/opt/vgpu"})


def test_targets_sharing_a_host_become_one_node_with_their_gpus(tmp_path: Path) -> None:
    first, second = LocalTransport("vm-1"), LocalTransport("vm-2")
    nodes = nodes_from_targets([
        _target("vm-1-gpu0", first, "gpu", tmp_path / "a"),
        _target("vm-1-gpu1", first, "gpu", tmp_path / "a"),
        _target("vm-2-gpu0", second, "gpu", tmp_path / "b"),
    ])
    assert [(n.name, n.gpus) for n in nodes] == [("vm-1", 2), ("vm-2", 1)]
    assert nodes[0].workdir == f"{tmp_path / 'a'}/train" and nodes[0].python == sys.executable
    assert nodes[0].address == "127.0.0.1" and nodes[0].env == {"PYTHONPATH": "/opt/vgpu"}
    assert nodes[1].shell is second


def test_cpu_targets_give_nodes_without_gpus(tmp_path: Path) -> None:
    (node,) = nodes_from_targets([_target("cpu", LocalTransport(), "cpu", tmp_path)])
    assert node.gpus == 0


def test_a_harness_command_that_is_not_python_m_loadgen_is_refused(tmp_path: Path) -> None:
    target = _target("vm-1", LocalTransport(), "gpu", tmp_path, harness="docker run img")
    with pytest.raises(InputError, match=r"target vm-1.*is not '<python> -m loadgen'"):
        nodes_from_targets([target])

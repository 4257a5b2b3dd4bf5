"""Bench targets (one per GPU or VM) become training nodes (one per host)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from vgpu.errors import InputError
from vgpu.remote.local import LocalTransport
from vgpu.targets.target import Target
from vgpu.train.targets import nodes_from_targets


def _target(name: str, transport: LocalTransport, kind: str, root: Path | str,
            harness: str = f"{sys.executable} -m loadgen",
            planned_slice: str | None = None) -> Target:
    return Target(instance=name, transport=transport, harness=harness, work_root=str(root),
                  device={"kind": kind}, device_label=kind, target_kind="vm",
                  env={"PYTHONPATH": "/opt/vgpu"}, planned_slice=planned_slice)


def test_targets_sharing_a_host_become_one_node_with_their_gpus(tmp_path: Path) -> None:
    first, second = LocalTransport("vm-1"), LocalTransport("vm-2")
    nodes = nodes_from_targets([
        _target("vm-1-gpu0", first, "gpu", tmp_path / "a"),
        _target("vm-1-gpu1", first, "gpu", tmp_path / "a"),
        _target("vm-2", second, "gpu", tmp_path / "b", planned_slice="passthrough+passthrough"),
    ], probe=False)
    assert [(n.name, n.gpus) for n in nodes] == [("vm-1", 2), ("vm-2", 2)]
    assert nodes[0].workdir == f"{tmp_path / 'a'}/train" and nodes[0].python == sys.executable
    assert nodes[0].address == "127.0.0.1" and nodes[0].env == {"PYTHONPATH": "/opt/vgpu"}
    assert nodes[1].shell is second


def test_cpu_targets_give_nodes_without_gpus(tmp_path: Path) -> None:
    (node,) = nodes_from_targets([_target("cpu", LocalTransport(), "cpu", tmp_path)],
                                 probe=False)
    assert node.gpus == 0


@pytest.mark.slow
def test_relative_bench_paths_become_absolute_and_torch_reports_the_node(
    tmp_path: Path,
) -> None:
    pytest.importorskip("torch", reason="the train extra (torch) is not installed")
    import torch

    transport = LocalTransport("vm-1", home=tmp_path)  # sessions start in tmp_path
    (node,) = nodes_from_targets([_target("vm-1", transport, "gpu", ".vgpu/bench")])
    assert node.workdir == f"{tmp_path}/.vgpu/bench/train"
    assert node.gpus == torch.cuda.device_count()  # what torch sees there, not the plan
    assert node.memory_bytes is not None and node.memory_bytes > 2**30


def test_a_harness_command_that_is_not_python_m_loadgen_is_refused(tmp_path: Path) -> None:
    target = _target("vm-1", LocalTransport(), "gpu", tmp_path, harness="docker run img")
    with pytest.raises(InputError, match=r"target vm-1.*is not '<python> -m loadgen'"):
        nodes_from_targets([target], probe=False)

"""The simulator lab's guests share this machine's cores: their CPU instances get the same
split as a bare-metal CPU run here (intra-op threads and the container's --cpus), and
instances on a GPU keep theirs."""

from __future__ import annotations

from pathlib import Path

from vgpu.remote.local import LocalTransport
from vgpu.targets.containers import ContainerLaunch
from vgpu.targets.prepared import split_this_machine
from vgpu.targets.target import Target


def target(name: str, kind: str, tmp_path: Path) -> Target:
    return Target(instance=name, transport=LocalTransport(home=tmp_path), harness="h",
                  work_root=str(tmp_path), device={"kind": kind}, device_label=kind,
                  target_kind="vm", container=ContainerLaunch(image="i", session="s"))


def test_cpu_instances_split_the_cores_and_their_containers_get_the_share(
        tmp_path: Path) -> None:
    targets = [target(f"vm{i}", "cpu", tmp_path) for i in range(3)]
    targets.append(target("gpu-vm", "mig", tmp_path))
    note = split_this_machine(targets, cores=8)
    assert [t.threads for t in targets] == [2, 2, 2, None]
    assert [t.container.cpus for t in targets if t.container] == [2.0, 2.0, 2.0, None]
    assert "3 guest instance(s) share this machine's 8 cores, 2 intra-op thread(s) each" in note


def test_more_instances_than_cores_get_one_thread_each(tmp_path: Path) -> None:
    targets = [target(f"vm{i}", "cpu", tmp_path) for i in range(7)]
    split_this_machine(targets, cores=2)
    assert {t.threads for t in targets} == {1}

"""Training nodes on SSH lab hosts (loopback, or inside network namespaces): an interpreter
the hosts' users may run, SSH transports, TrainNodes over them, and a two-node scenario
whose network is a link of a given speed."""

from __future__ import annotations

import os
import shlex
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.labs.sshlab import LabHost, SshLab
from vgpu.model import load_scenario
from vgpu.model.scenario import Scenario
from vgpu.remote.hostlog import HostLog
from vgpu.remote.redact import Redactor
from vgpu.remote.ssh import SSHTransport
from vgpu.remote.targets import ConnectOptions, HostTarget
from vgpu.train.launch import TrainNode

REPO = Path(__file__).resolve().parents[2]


def _world_executable(path: Path) -> bool:
    """Whether another unix user can run ``path``: every parent searchable by others."""
    real = path.resolve()
    return all(p.stat().st_mode & 0o001 for p in [real, *real.parents])


def lab_interpreter() -> tuple[str, dict[str, str]]:
    """An interpreter the lab hosts' users can run, with this environment's packages.
    A venv whose base interpreter sits under a private home (e.g. pyenv in /root) is not
    runnable by them; the system's Python of the same minor version loads the same wheels."""
    paths = {"PYTHONPATH": ":".join([str(REPO), *(p for p in sys.path if "site-packages" in p)])}
    if _world_executable(Path(sys.executable)):
        return sys.executable, {}
    system = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    if system.exists() and _world_executable(system):
        return str(system), paths
    pytest.skip(f"no Python {sys.version_info.major}.{sys.version_info.minor} that other "
                "users may run")


def install_lab_harness(host: LabHost) -> str:
    """Where `vgpu provision` puts the harness's Python: here a wrapper around an
    interpreter the host's user may run, with this checkout and its packages. Returns
    the wrapper's path on the host."""
    python, env = lab_interpreter()
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    host.write_file(".vgpu/harness/venv/bin/python",
                    f'#!/bin/sh\n{"export " + exports if exports else ""}\n'
                    f'exec {shlex.quote(python)} "$@"\n', mode=0o755)
    for folder, dirs, _ in os.walk(host.home / ".vgpu"):
        os.chown(folder, host.uid, host.uid)
        for name in dirs:
            os.chown(Path(folder, name), host.uid, host.uid)
    return f"{host.home}/.vgpu/harness/venv/bin/python"


@contextmanager
def lab_train_nodes(lab: SshLab, logs: Path) -> Iterator[list[TrainNode]]:
    """One TrainNode per lab host, reached over SSH at the host's own address."""
    python, env = lab_interpreter()
    transports: list[SSHTransport] = []
    nodes: list[TrainNode] = []
    try:
        for host in lab.hosts:
            target = HostTarget(
                name=host.name, address=host.address, user=host.user, port=host.port,
                key_file=lab.key_path, known_hosts=lab.known_hosts_path,
            )
            transport = SSHTransport(
                target, ConnectOptions(retries=0), HostLog(logs / f"{host.name}.log", Redactor())
            )
            transport.connect()
            transports.append(transport)
            nodes.append(TrainNode(name=host.name, shell=transport, address=host.address,
                                   workdir=f"{host.home}/train", python=python, env=env))
        yield nodes
    finally:
        for transport in transports:
            transport.close()


def link_scenario(directory: Path, mbit: int) -> Scenario:
    """Two nodes, one rank each, over a link of ``mbit`` Mbit/s on eth0."""
    path = directory / f"train_link_{mbit}m.yaml"
    path.write_text(textwrap.dedent(f"""\
        id: train_link_{mbit}m
        name: train-link-{mbit}m
        platform: bare-metal
        gpu: A100-80GB
        vms:
          - name: "node-{{n}}"
            count: 2
            vgpus: [passthrough]
            spread: true
        workloads:
          - name: resnet-tiny-train
            kind: training
            model: resnet-tiny
            nodes: 2
            gpus_per_node: 1
            batch_per_gpu: 8
            image_size: 32
            comm_backend: gloo
            warmup_steps: 1
            cpu_steps: 4
        network:
          speed_gbps: {mbit / 1000}
          rdma: none
          interface: eth0
        repeats: 2
        """))
    return load_scenario(path)

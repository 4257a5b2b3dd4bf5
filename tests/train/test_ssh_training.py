"""Training over real SSH: two loopback sshd hosts (own users and homes) each run a torchrun
node through the SSH transport; rendezvous on the first host's address."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the train extra (torch) is not installed")

from tests.labs.sshlab import SshLab, lab_available
from tests.train.labnodes import REPO, lab_train_nodes
from vgpu.errors import InputError, PlanError
from vgpu.model import load_scenario
from vgpu.model.scenario import TrainingWorkload
from vgpu.train import preflight
from vgpu.train.launch import Launch, TrainNode, run_launch, torchrun_command
from vgpu.train.netenv import NetworkOptions, comm_environment
from vgpu.train.scenario_runner import Overrides, prepare_launch

pytestmark = [
    pytest.mark.train, pytest.mark.sshd, pytest.mark.slow,
    pytest.mark.skipif(lab_available() is not None, reason=str(lab_available())),
]

SPEC = {
    "schema_version": 1, "model": "resnet-tiny", "image_size": 16, "batch_size": 4,
    "warmup_steps": 1, "measured_steps": 5, "comm_probe_steps": 2,
}


def _free_port(address: str) -> int:
    with socket.socket() as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def ssh_nodes(ssh_lab: tuple[SshLab, list[TrainNode]]) -> list[TrainNode]:
    return ssh_lab[1]


@pytest.fixture(scope="module")
def ssh_lab(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[SshLab, list[TrainNode]]]:
    logs = tmp_path_factory.mktemp("ssh-logs")
    with SshLab(2, guest_sim=False) as lab, lab_train_nodes(lab, logs) as nodes:
        yield lab, nodes


def test_two_ssh_nodes_train_in_step(ssh_nodes: list[TrainNode], tmp_path: Path) -> None:
    launch = Launch(
        nodes=ssh_nodes, procs_per_node=1, command="train", spec=SPEC,
        master_port=_free_port(ssh_nodes[0].address),
        comm_env=comm_environment(NetworkOptions(interface="lo"), "gloo"),
    )
    preflight.check_nodes_ready(launch, "scenario.yaml")
    record = run_launch(launch, tmp_path).record
    assert record["status"] == "ok", record.get("reason")
    assert record["world_size"] == 2 and record["settings"]["nodes"] == 2
    assert sorted(r["node_rank"] for r in record["ranks"]) == [0, 1]
    assert len({r["param_digest"] for r in record["ranks"]}) == 1
    assert record["totals"]["images_per_s"] == pytest.approx(
        sum(r["images_per_s"] for r in record["ranks"])
    )
    assert (tmp_path / "result.json").exists()


def test_missing_torch_on_a_node_is_an_input_error_before_launch(
    ssh_nodes: list[TrainNode],
) -> None:
    # The system interpreter sees the harness sources but has no torch installed.
    without_torch = TrainNode(
        name=ssh_nodes[1].name, shell=ssh_nodes[1].shell, address=ssh_nodes[1].address,
        workdir=ssh_nodes[1].workdir, python="/usr/bin/python3",
        env={"PYTHONPATH": str(REPO)},
    )
    launch = Launch(nodes=[ssh_nodes[0], without_torch], procs_per_node=1, command="train",
                    spec=SPEC)
    with pytest.raises(InputError) as caught:
        preflight.check_nodes_ready(launch, "scenario.yaml")
    message = str(caught.value)
    assert f"node {without_torch.name}" in message and "torch is missing" in message
    assert ssh_nodes[0].name not in message.replace(without_torch.name, "")


# A SIMULATOR of Mellanox OFED's ibdev2netdev: no ConnectX NIC exists here.
IBDEV2NETDEV_SIM = """#!/bin/sh
echo "mlx5_{hca} port 1 ==> ens1f0np0 (Up)"
echo "mlx5_9 port 1 ==> ens9 (Down)"
"""


def test_port_mapping_pins_each_node_to_its_own_hca_port(
    ssh_lab: tuple[SshLab, list[TrainNode]], tmp_path: Path,
) -> None:
    lab, nodes = ssh_lab
    for index, host in enumerate(lab.hosts):
        host.put_executable("ibdev2netdev", IBDEV2NETDEV_SIM.format(hca=index))
    gpu_nodes = [replace(node, gpus=1) for node in nodes]
    scenario = load_scenario(REPO / "scenarios" / "train_multinode_2.yaml")
    workload = scenario.workloads[0]
    assert isinstance(workload, TrainingWorkload)
    network = workload.network.model_copy(update={"interface": "ens1f0np0"})
    workload = workload.model_copy(update={"network": network})
    notes: list[str] = []
    launch = prepare_launch(scenario, 0, workload, gpu_nodes, tmp_path,
                            Overrides(model="resnet-tiny", image_size=16), notes)
    assert [node.env["NCCL_IB_HCA"] for node in launch.nodes] == ["=mlx5_0:1", "=mlx5_1:1"]
    assert launch.comm_env["NCCL_SOCKET_IFNAME"] == "ens1f0np0"
    assert launch.comm_env["NCCL_IB_DISABLE"] == "0"
    assert launch.spec["device"] == "gpu" and launch.spec["backend"] == "nccl"
    assert "--nnodes 2 --node-rank 1" in torchrun_command(launch, 1)
    assert "NCCL_IB_HCA==mlx5_1:1" in torchrun_command(launch, 1)


def test_node_count_beyond_the_targets_names_the_scenario_field(
    ssh_lab: tuple[SshLab, list[TrainNode]], tmp_path: Path,
) -> None:
    scenario = load_scenario(REPO / "scenarios" / "train_multinode_4.yaml")
    workload = scenario.workloads[0]
    assert isinstance(workload, TrainingWorkload)
    with pytest.raises(PlanError) as caught:
        prepare_launch(scenario, 0, workload, ssh_lab[1], tmp_path, Overrides(), [])
    assert "train_multinode_4.yaml workloads[0].nodes" in str(caught.value)
    assert "4 nodes requested but the inventory gives 2" in str(caught.value)

"""Communication environment and the study's port mapping (pure)."""

from __future__ import annotations

from vgpu.train.netenv import NetworkOptions, comm_environment, port_mapping_environment
from vgpu.train.portmap import hca_ports, parse_ibdev2netdev

IBDEV2NETDEV = """\
mlx5_0 port 1 ==> ens1f0np0 (Up)
mlx5_1 port 1 ==> ens1f1np1 (Down)
mlx5_2 port 1 ==> ib0 (Up)
"""


def test_nccl_environment_from_named_options() -> None:
    env = comm_environment(NetworkOptions(interface="ens1f0np0", rdma=False), "nccl")
    assert env == {
        "NCCL_SOCKET_IFNAME": "ens1f0np0",
        "GLOO_SOCKET_IFNAME": "ens1f0np0",
        "NCCL_IB_DISABLE": "1",
    }


def test_rdma_on_enables_ib_and_gpudirect() -> None:
    env = comm_environment(NetworkOptions(rdma=True), "nccl")
    assert env == {"NCCL_IB_DISABLE": "0", "NCCL_NET_GDR_LEVEL": "PHB"}


def test_gloo_gets_only_its_interface_and_explicit_env_wins() -> None:
    options = NetworkOptions(interface="eth1", rdma=True, env={"GLOO_SOCKET_IFNAME": "eth2"})
    assert comm_environment(options, "gloo") == {"GLOO_SOCKET_IFNAME": "eth2"}


def test_ibdev2netdev_parsing_and_port_choice() -> None:
    assert parse_ibdev2netdev(IBDEV2NETDEV)["ens1f1np1"] == ("mlx5_1:1", False)
    assert hca_ports(IBDEV2NETDEV, "ens1f1np1") == ["mlx5_1:1"]
    assert hca_ports(IBDEV2NETDEV, None) == ["mlx5_0:1", "mlx5_2:1"]
    assert hca_ports(IBDEV2NETDEV, "eth9") == []
    assert port_mapping_environment(["mlx5_0:1", "mlx5_2:1"]) == {
        "NCCL_IB_HCA": "=mlx5_0:1,mlx5_2:1"
    }

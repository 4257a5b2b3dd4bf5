"""The scenario's network dimension for training: the options the ranks use (the
scenario's ``network`` with each workload's own settings on top) and the platform record
that says what link a training run or allreduce probe crossed."""

from __future__ import annotations

import socket
from collections.abc import Sequence

from loadgen.contract import HARNESS_VERSION
from vgpu.model.scenario import Scenario, ScenarioNetwork, TrainingNetwork
from vgpu.results.store.records import Platform
from vgpu.results.views.allreduce_view import link_label
from vgpu.train.launch import TrainNode
from vgpu.train.netenv import NetworkOptions
from vgpu.train.storage import Storage


def network_options(scenario_network: ScenarioNetwork | None,
                    workload_network: TrainingNetwork) -> NetworkOptions:
    """The workload's settings win; unset ones come from the scenario's network (its
    interface, and GPUDirect RDMA on for roce/ib)."""
    interface = workload_network.interface
    rdma = workload_network.rdma
    if scenario_network is not None:
        interface = interface or scenario_network.interface
        if rdma is None:
            rdma = scenario_network.rdma != "none"
    return NetworkOptions(interface, rdma, workload_network.port_mapping,
                          dict(workload_network.env))


def describe_link(network: ScenarioNetwork | None) -> str:
    """The scenario's link in words (or that the scenario does not give one)."""
    if network is None:
        return "not given (the scenario has no network)"
    return link_label(network.speed_gbps, network.rdma, network.interface)


def training_platform(scenario: Scenario, nodes: Sequence[TrainNode] | None,
                      storage: Storage | None = None) -> Platform:
    """What a training run or probe ran on, as far as the orchestrator knows it: the first
    node (or this machine), the harness version, the scenario's network (only where the
    ranks ran on the scenario's nodes: ranks on one machine cross no link) and, for a
    file-fed run, the storage its dataset was read from."""
    network = scenario.network if nodes else None
    return Platform(
        storage_kind=storage.kind if storage else None,
        storage_mount=storage.mount if storage else None,
        host=nodes[0].name if nodes else socket.gethostname(),
        harness_version=HARNESS_VERSION,
        link_speed_gbps=network.speed_gbps if network else None,
        rdma=network.rdma if network else None,
        network_interface=network.interface if network else None,
    )

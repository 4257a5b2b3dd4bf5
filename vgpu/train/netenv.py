"""Communication environment for torchrun ranks, from the scenario's named network options.

Only documented NCCL/Gloo variables are set; the study's ATS and NIC settings are host and
VM configuration (applied by provisioning), not process environment."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class NetworkOptions:
    interface: str | None = None
    rdma: bool | None = None
    # The study's "map logical to physical ports" (ibdev2netdev): ON pins NCCL to the HCA
    # port behind ``interface`` on each node (see vgpu.train.portmap).
    port_mapping: bool | None = None
    env: Mapping[str, str] = field(default_factory=dict)


def comm_environment(options: NetworkOptions, backend: str) -> dict[str, str]:
    env: dict[str, str] = {}
    if options.interface:
        env["GLOO_SOCKET_IFNAME"] = options.interface
        if backend == "nccl":
            env["NCCL_SOCKET_IFNAME"] = options.interface
    if backend == "nccl":
        if options.rdma is False:
            env["NCCL_IB_DISABLE"] = "1"
        elif options.rdma is True:
            env["NCCL_IB_DISABLE"] = "0"
            # GPUDirect RDMA between NIC and GPU across the PCIe switch ("PHB" in NCCL terms).
            env["NCCL_NET_GDR_LEVEL"] = "PHB"
    env.update(options.env)  # explicit scenario env wins over derived values
    return env


def port_mapping_environment(hca_ports: list[str]) -> dict[str, str]:
    """Pins NCCL to exactly these HCA ports (a leading "=" means exact names, not prefixes)."""
    return {"NCCL_IB_HCA": "=" + ",".join(hca_ports)}

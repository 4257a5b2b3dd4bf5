"""The study's logical-to-physical port mapping: ``ibdev2netdev`` output -> NCCL_IB_HCA."""

from __future__ import annotations

import re

_LINE = re.compile(r"^(?P<hca>\S+) port (?P<port>\d+) ==> (?P<netdev>\S+) \((?P<state>\w+)\)")


def parse_ibdev2netdev(text: str) -> dict[str, tuple[str, bool]]:
    """netdev -> ("hca:port", is_up) for every line like ``mlx5_0 port 1 ==> ens1f0 (Up)``."""
    mapping: dict[str, tuple[str, bool]] = {}
    for line in text.splitlines():
        match = _LINE.match(line.strip())
        if match:
            mapping[match["netdev"]] = (f"{match['hca']}:{match['port']}", match["state"] == "Up")
    return mapping


def hca_ports(text: str, interface: str | None) -> list[str]:
    """The HCA port behind ``interface``, or without one every port whose link is up."""
    mapping = parse_ibdev2netdev(text)
    if interface is not None:
        return [mapping[interface][0]] if interface in mapping else []
    return [port for port, up in mapping.values() if up]

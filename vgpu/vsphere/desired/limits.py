"""Defaults shared by the vSphere commands and the executor (no pyVmomi import here, so the
CLI can show them without loading it)."""

from __future__ import annotations

# VMs worked on at the same time. Each worker mostly waits on a vCenter task, and vCenter
# queues what exceeds its own per-host and per-datastore limits, so the bound is set for
# lab scale: 64 VMs are built in one wave (see "Limits at scale" in docs/architecture.md).
DEFAULT_CONCURRENCY = 64
DEFAULT_IP_TIMEOUT_S = 600.0
# How long a guest gets to shut down (VMware Tools) before its VM is powered off hard.
DEFAULT_SHUTDOWN_TIMEOUT_S = 120.0

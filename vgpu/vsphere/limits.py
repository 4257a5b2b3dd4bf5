"""Defaults shared by the vSphere commands and the executor (no pyVmomi import here, so the
CLI can show them without loading it)."""

from __future__ import annotations

DEFAULT_CONCURRENCY = 8
DEFAULT_IP_TIMEOUT_S = 600.0

"""The connect options every lab test reaches its SSH hosts with: a lab host on loopback
answers at once or not at all, so short timeouts and a quick retry keep a refused
connection from stalling a test."""

from __future__ import annotations

from vgpu.remote.targets import ConnectOptions

FAST = ConnectOptions(connect_timeout=5, retries=2, backoff=0.1)

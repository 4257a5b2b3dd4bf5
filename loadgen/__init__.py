"""The vgpu node harness: MLPerf LoadGen driving ResNet50/BERT on ONNX Runtime or Triton.

It runs on a VM, a bare-metal host or this machine and produces one result record
(result.json) plus LoadGen's own logs. It never imports ``vgpu``; the contract is the JSON
run spec in and the JSON result record out (docs/harness.md).
"""

from __future__ import annotations

HARNESS_VERSION = "1.0.0"
SCHEMA_VERSION = 1

__all__ = ["HARNESS_VERSION", "SCHEMA_VERSION"]

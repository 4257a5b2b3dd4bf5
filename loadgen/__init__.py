"""The vgpu node harness: MLPerf LoadGen driving ResNet50/BERT on ONNX Runtime or Triton.

It runs on a VM, a bare-metal host or this machine and produces one result record
(result.json) plus LoadGen's own logs. It never imports ``vgpu``; the contract is the JSON
run spec in and the JSON result record out (docs/harness.md), typed in ``loadgen.contract``.
"""

from __future__ import annotations

from loadgen.contract import HARNESS_VERSION, SCHEMA_VERSION

__all__ = ["HARNESS_VERSION", "SCHEMA_VERSION"]

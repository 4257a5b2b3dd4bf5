"""Inference backends behind one interface: ONNX Runtime in-process and Triton (gRPC/HTTP)."""

from __future__ import annotations

from loadgen.backends.base import Backend, Done, Feeds

__all__ = ["Backend", "Done", "Feeds"]

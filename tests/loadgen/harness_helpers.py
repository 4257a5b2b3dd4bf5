"""Helpers for the node-harness tests (importable by name from this folder)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def base_spec(cache_dir: Path, **overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schema_version": 1,
        "model": {"name": "resnet50", "variant": "tiny", "precision": "fp32"},
        "backend": {"name": "onnxruntime", "threads": 1},
        "device": {"kind": "cpu"},
        "loadgen": {"scenario": "Offline", "mode": "PerformanceOnly", "min_duration_ms": 500,
                    "min_query_count": 1, "target_qps": 2000, "performance_sample_count": 64},
        "batch_size": 4,
        "seed": 7,
        "warmup_queries": 2,
        "instance_name": "test-instance",
        "cache_dir": str(cache_dir),
    }
    spec.update(overrides)
    return spec


def run_cli(*args: str, stdin: str | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "loadgen", *args], input=stdin,
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)

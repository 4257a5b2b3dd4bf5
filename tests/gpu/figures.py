"""Figures the GPU tests measure, gathered for gpu-check.json: the session writes them to
the file named by VGPU_GPU_FIGURES when it ends (scripts/gpu-check.sh sets it)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

FIGURES_ENV = "VGPU_GPU_FIGURES"
FIGURES: dict[str, Any] = {}


def note(key: str, value: Any) -> None:
    FIGURES[key] = value
    print(f"{key}: {json.dumps(value, default=str)}")


def write(exit_status: int) -> Path | None:
    target = os.environ.get(FIGURES_ENV)
    if not target:
        return None
    path = Path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {"written_unix": time.time(), "pytest_exit_status": exit_status, **FIGURES}
    path.write_text(json.dumps(document, indent=2, sort_keys=True, default=str) + "\n")
    return path

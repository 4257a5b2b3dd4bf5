"""Fixtures for the node-harness tests: a per-session model cache and a spec writer."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.loadgen.harness_helpers import base_spec


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("harness-models")


@pytest.fixture
def write_spec(tmp_path: Path, model_cache: Path) -> Callable[..., Path]:
    def write(name: str = "spec.json", **overrides: Any) -> Path:
        path = tmp_path / name
        path.write_text(json.dumps(base_spec(model_cache, **overrides)))
        return path
    return write

"""``python -m loadgen --version``: the harness and runtime versions as JSON (host venv)."""

from __future__ import annotations

import json

import onnxruntime as ort
import pytest

from loadgen import HARNESS_VERSION
from loadgen.__main__ import main
from loadgen.versions import version_info
from tests.loadgen.harness_helpers import run_cli


def test_version_reports_the_runtime() -> None:
    done = run_cli("--version", timeout=60)
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    assert info["harness"] == HARNESS_VERSION and info["schema_version"] == 1
    assert info["onnxruntime"]["version"] == ort.__version__
    assert info["onnxruntime"]["package"] in ("onnxruntime", "onnxruntime-gpu")
    assert info["onnxruntime"]["providers"] == ort.get_available_providers()
    assert info["mlcommons-loadgen"] and info["numpy"] and info["onnx"]
    # torch is reported only when the process already loaded it (this test process may
    # have; the harness CLI, which runs no torch backend here, has not).
    assert info.pop("torch") is None
    here = json.loads(json.dumps(version_info()))
    here.pop("torch")
    assert info == here


def test_usage_mentions_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert main(["nope"]) == 2
    assert "--version" in capsys.readouterr().err

"""Under CI (or VGPU_REQUIRE_LABS=1) a missing lab fails the run; GPU skips stay skips
unless VGPU_REQUIRE_GPU=1. Runs the suite's own plugin (tests/labs/required.py) on a
small test file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TESTS = '''
import pytest
pytestmark = pytest.mark.filterwarnings("ignore")
def test_lab():
    pytest.skip("sshd lab: not root")
def test_gpu():
    pytest.skip("gpu: needs a GPU")
@pytest.mark.skipif(True, reason="vcsim: go missing")
def test_marker():
    pass
def test_ok():
    pass
'''


def _run(folder: Path, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items()
             if k not in ("CI", "VGPU_REQUIRE_LABS", "VGPU_REQUIRE_GPU")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p",
                           "no:cacheprovider", "-p", "tests.labs.required", str(folder)],
                          capture_output=True, text=True, cwd=folder, timeout=120,
                          env={**clean, **env, "PYTHONPATH": str(ROOT)})
    return proc.stdout.strip().splitlines()[-1]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "test_labs.py").write_text(TESTS)
    return tmp_path


def test_outside_ci_missing_labs_skip(folder: Path) -> None:
    assert _run(folder).startswith("1 passed, 3 skipped")


def test_under_ci_missing_labs_fail_and_gpu_skips_stay(folder: Path) -> None:
    last = _run(folder, CI="true")
    assert "1 failed, 1 passed, 1 skipped, 1 error" in last, last


@pytest.mark.slow
def test_require_labs_flag_and_require_gpu(folder: Path) -> None:
    assert "1 failed, 1 passed, 1 skipped, 1 error" in _run(folder, VGPU_REQUIRE_LABS="1")
    assert "2 failed, 1 passed, 1 error" in _run(folder, VGPU_REQUIRE_LABS="1",
                                                  VGPU_REQUIRE_GPU="1")
    assert _run(folder, CI="true", VGPU_REQUIRE_LABS="0").startswith("1 passed, 3 skipped")


def test_optional_gpu_skips_stay_skips_under_require_gpu(tmp_path: Path) -> None:
    (tmp_path / "test_optional.py").write_text(
        "import pytest\n"
        "def test_optional():\n    pytest.skip('gpu: optional: onnxruntime-gpu absent')\n"
        "def test_gpu():\n    pytest.skip('gpu: needs a GPU')\n")
    last = _run(tmp_path, CI="true", VGPU_REQUIRE_GPU="1")
    assert last.startswith("1 failed, 1 skipped"), last


def test_a_peer_tool_vgpu_does_not_install_stays_a_skip(tmp_path: Path) -> None:
    (tmp_path / "test_peer.py").write_text(
        'import pytest\n'
        'def test_checker():\n'
        '    pytest.skip("external: VGPU_MLPERF_CHECKER is not set")\n'
        'def test_lab():\n'
        '    pytest.skip("postgres: initdb missing")\n')
    assert "1 failed, 1 skipped" in _run(tmp_path, VGPU_REQUIRE_LABS="1",
                                         VGPU_REQUIRE_GPU="1")

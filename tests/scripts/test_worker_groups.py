"""The quick tier runs on two pytest-xdist workers; the whole suite in one process."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _pytest_line(quick: bool, workers: str | None) -> str:
    """The pytest command scripts/test.sh would run, read off a stand-in venv that prints it."""
    script = (ROOT / "scripts" / "test.sh").read_text()
    start = script.index("workers=${VGPU_TEST_WORKERS:-2}")
    end = script.index("rc=$?")
    body = script[start:end].replace('"$venv/bin/python" -m pytest', "echo pytest")
    body = body.replace('"$venv/bin/python" -c \'import xdist\'', "true")
    env = {**os.environ, "quick": "1" if quick else "0"}
    env.pop("VGPU_TEST_WORKERS", None)
    if workers is not None:
        env["VGPU_TEST_WORKERS"] = workers
    done = subprocess.run(["bash", "-c", f"quick=$quick; QUICK_MARKERS=q; set -- -q\n{body}"],
                          env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_the_quick_tier_runs_on_two_workers_unless_told() -> None:
    assert _pytest_line(quick=True, workers=None) == "pytest -n 2 -m q -q"
    assert _pytest_line(quick=True, workers="3") == "pytest -n 3 -m q -q"
    assert _pytest_line(quick=True, workers="0") == "pytest -m q -q"


def test_the_whole_suite_runs_in_one_process() -> None:
    assert _pytest_line(quick=False, workers=None) == "pytest -q"
    assert _pytest_line(quick=False, workers="2") == "pytest -q"

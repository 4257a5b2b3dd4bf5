"""README's tour with its own default bench settings (two repeats of each workload run;
about 5-6 minutes on a 2-core machine), outside the test suite, which runs it shorter
(tests/vsphere/test_tour.py): `.venv/bin/python -m pytest benchmarks/tour_check.py` (as
root)."""

from __future__ import annotations

from pathlib import Path

from tests.vsphere.test_tour import pytestmark, run_tour

__all__ = ["pytestmark"]


def test_the_default_tour_runs_to_the_end_and_leaves_nothing(tmp_path: Path) -> None:
    run_tour(tmp_path, None)

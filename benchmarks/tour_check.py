"""README's tour end to end (scripts/tour.sh on `vgpu sim up`'s lab), outside the test
suite: short (one 0.5 s repeat per bench, about 2 minutes on a 2-core machine) and with
the tour's own default bench settings (about 7 minutes). The suite tests its parts one by
one (the simulator lab, apply and provisioning, benches in containers, revalidate, the
upgrade window). As root:

    .venv/bin/python -m pytest benchmarks/tour_check.py
"""

from __future__ import annotations

from pathlib import Path

from tests.vsphere.tour import SHORT_BENCH, pytestmark, run_tour

__all__ = ["pytestmark"]


def test_the_short_tour_runs_to_the_end_and_leaves_nothing(tmp_path: Path) -> None:
    run_tour(tmp_path, SHORT_BENCH)


def test_the_default_tour_runs_to_the_end_and_leaves_nothing(tmp_path: Path) -> None:
    run_tour(tmp_path, None)

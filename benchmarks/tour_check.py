"""The README's tour end to end through the CLI (scripts/tour.sh): `vgpu sim up` with
guests, preflight, apply with provisioning, bench on every guest, revalidate with a
captured baseline, `vgpu sim upgrade`, revalidate again (drift), destroy, `vgpu sim down`
leaving no namespace, process, veth or user behind. About 5 minutes, so it runs outside
the test suite: `.venv/bin/python -m pytest benchmarks/tour_check.py` (as root)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.labs.sshlab import lab_available as ssh_lab_available
from tests.labs.vcsim import lab_available
from vgpu.sim import guests

REPO = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.vcsim, pytest.mark.sshd, pytest.mark.slow, pytest.mark.timeout(900),
              pytest.mark.skipif(lab_available() is not None, reason=str(lab_available())),
              pytest.mark.skipif(ssh_lab_available() is not None,
                                 reason=str(ssh_lab_available()))]


def test_the_tour_runs_to_the_end_and_leaves_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "VGPU": f"{sys.executable} -m vgpu", "PYTHONPATH": str(REPO),
           "TOUR_DIR": str(tmp_path), "COLUMNS": "200"}
    env.pop("VGPU_INVENTORY", None)
    done = subprocess.run(["bash", str(REPO / "scripts" / "tour.sh")], capture_output=True,
                          text=True, env=env, timeout=880, check=False)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-6000:]
    assert "== tour passed in" in out
    for n in range(1, 8):
        assert f"simulator guest s8-1g-{n} at " in out
    assert "7 hosts: " in out and "0 hosts failed" in out
    assert "running on the simulator lab's VMs: s8-1g-1" in out
    assert "synchronised start" in out
    assert "this run's series will be recorded as baseline 'pre-upgrade'" in out
    assert "simulator lab upgraded at" in out
    assert "24022510" in out  # the drift revalidate finds after the upgrade
    assert "COULD NOT RUN" not in out
    assert (tmp_path / "vgpu-results.db").exists()
    assert not (tmp_path / "vgpu-inventory.yaml").exists()
    assert guests.leftovers() == []
    sshd = subprocess.run(["pgrep", "-f", "sim-state/lab/guests"], capture_output=True,
                          text=True, check=False)
    assert sshd.stdout == ""

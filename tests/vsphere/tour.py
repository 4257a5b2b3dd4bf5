"""README's tour end to end through the CLI (scripts/tour.sh), as benchmarks/tour_check.py
runs it (about 2 minutes short, 7 default: a long real run, outside the suite, whose
parts the suite tests one by one): `vgpu sim up` with a Docker
daemon and guests, preflight, apply with provisioning (the harness image built on the
guests), bare-metal references on this machine, bench in a container per guest with a
verdict, a host-pinned revalidate with a captured baseline, the upgrade window (drain,
`vgpu sim upgrade --host`, undrain), revalidate of that host again (drift), destroy, `vgpu
sim down` leaving no namespace, process, veth, daemon or user behind."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.labs.sshlab import lab_available as ssh_lab_available
from tests.labs.vcsim import lab_available
from vgpu.sim import dockerd, guests

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.vcsim, pytest.mark.sshd, pytest.mark.docker, pytest.mark.slow,
              pytest.mark.timeout(900),
              pytest.mark.skipif(lab_available() is not None, reason=str(lab_available())),
              pytest.mark.skipif(ssh_lab_available() is not None,
                                 reason=str(ssh_lab_available())),
              pytest.mark.skipif(dockerd.missing() is not None,
                                 reason=f"docker lab: {dockerd.missing()}")]


# Each bench and revalidate: one repeat of 0.5 s (the verdicts come out INCONCLUSIVE, which
# is all a CPU lab can say)
SHORT_BENCH = "--workload resnet50-offline --runs 1 --duration 0.5"


def run_tour(folder: Path, bench: str | None) -> str:
    """scripts/tour.sh in ``folder`` (TOUR_BENCH ``bench``; None: the script's default),
    checked step by step; its output."""
    env = {**os.environ, "VGPU": f"{sys.executable} -m vgpu", "PYTHONPATH": str(REPO),
           "TOUR_DIR": str(folder), "COLUMNS": "200"}
    env.pop("VGPU_INVENTORY", None)
    if bench is not None:
        env["TOUR_BENCH"] = bench
        env["TOUR_CAPTURE"] = "--baseline-series 1"  # the three-series capture: revalidate's tests
    done = subprocess.run(["bash", str(REPO / "scripts" / "tour.sh")], capture_output=True,
                          text=True, env=env, timeout=880, check=False)
    out = done.stdout + done.stderr
    check_tour(folder, done.returncode, out)
    return out


def check_tour(tmp_path: Path, returncode: int, out: str) -> None:
    done_code = returncode
    assert done_code == 0, out[-6000:]
    assert "== tour passed in" in out
    for n in range(1, 8):
        assert f"simulator guest s8-1g-{n} at " in out
    assert "7 hosts: " in out and "0 hosts failed" in out
    assert "running on the simulator lab's VMs: s8-1g-1" in out
    assert "each harness instance in its own container on the CPU" in out
    assert "running on this machine: scenario bm8 is bare metal" in out
    assert "verdict vs scenario bm8: " in out and "verdict vs scenario bm6: " in out
    assert "synchronised start" in out
    assert "this run's series will be recorded as baseline 'pre-upgrade@DC0_C0_H0'" in out
    assert "host DC0_C0_H0 is in maintenance mode" in out  # drain
    assert "host DC0_C0_H0 upgraded in place" in out
    assert "host DC0_C0_H0 is out of maintenance mode" in out  # undrain checked the upgrade
    assert "24022510" in out  # the drift revalidate finds after the upgrade
    assert "COULD NOT RUN" not in out
    assert (tmp_path / "vgpu-results.db").exists()
    assert not (tmp_path / "vgpu-inventory.yaml").exists()
    assert guests.leftovers() == []
    with sqlite3.connect(tmp_path / "vgpu-results.db") as db:
        rows = db.execute("SELECT runtime, simulator FROM platforms WHERE host LIKE 'DC0%'")
        recorded = set(rows.fetchall())
    assert recorded and all(runtime == "container" and simulator.startswith("vgpu sim lab")
                            for runtime, simulator in recorded)
    sshd = subprocess.run(["pgrep", "-f", "sim-state/lab/guests"], capture_output=True,
                          text=True, check=False)
    assert sshd.stdout == ""

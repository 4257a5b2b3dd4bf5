"""Everything but the upgrade held fixed, on `vgpu sim up`'s whole lab (vSphere simulator,
a guest per VM, the guests' docker forwarding to the lab's real Docker daemon), through
the CLI as a lab engineer runs it: a baseline of scenario 6 captured with harness image X
(built on the guests for guest driver branch 535); `vgpu sim upgrade` (every host's VIB to
branch 550, and with it the guests' driver); the revalidation changes the guests' driver
in place and runs image X by its ID (the record shows X again and the verdict says it was
held); with --rebuild-image the image is made anew for branch 550, the record shows another
image, and the verdict names the change beside the components that changed with it; X
removed from the guests, holding it again is a scenario that could not run, with the fix."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.labs.simlab import WHOLE_LAB_MARKS
from vgpu.sim import state

REPO = Path(__file__).resolve().parents[2]
# One short repeat per bench: the images and the verdicts' notes are what is checked here.
BENCH = ("--workload", "resnet50-offline", "--runs", "1", "--duration", "0.5")
pytestmark = WHOLE_LAB_MARKS


class Lab:
    """`vgpu sim up` in its own folder and state directory, driven through the CLI."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "250",
                    "VGPU_SIM_STATE_DIR": str(folder / "sim-state")}
        self.env.pop("VGPU_INVENTORY", None)

    def vgpu(self, *args: str, codes: tuple[int, ...] = (0,)) -> str:
        done = subprocess.run([sys.executable, "-m", "vgpu", *args], cwd=self.folder,
                              env=self.env, capture_output=True, text=True, timeout=1200,
                              check=False)
        out = done.stdout + done.stderr
        with (self.folder / "outputs.txt").open("a", encoding="utf-8") as log:
            log.write(f"== {args}\n{out}\n")
        assert done.returncode in codes, f"vgpu {' '.join(args)}: exit {done.returncode}\n" \
            + out[-8000:]
        return " ".join(out.split())

    def images(self) -> list[tuple[str, str]]:
        """(container image, its ID) of the newest run's instances."""
        with sqlite3.connect(self.folder / "vgpu-results.db") as db:
            run = db.execute("SELECT id FROM runs WHERE scenario_id = '6' AND status = 'ok' "
                             "ORDER BY id DESC LIMIT 1").fetchone()[0]
            rows = db.execute(
                "SELECT p.container_image, p.container_image_id FROM "
                "instances i JOIN platforms p ON p.id = i.platform_id WHERE i.run_id = ?",
                (run,)).fetchall()
        return sorted(set(rows))

    def remove_image(self, image_id: str) -> None:
        """Removes an image from the lab's Docker daemon, which every guest's docker uses."""
        record = state.status()
        assert record is not None and record.guest_network is not None
        daemon = record.guest_network.daemon()
        assert daemon is not None
        subprocess.run(daemon.cli.argv("rmi", image_id), check=True, capture_output=True,
                       timeout=120)


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    lab = Lab(tmp_path)
    monkeypatch.setenv("VGPU_SIM_STATE_DIR", lab.env["VGPU_SIM_STATE_DIR"])
    lab.vgpu("sim", "up", "--port", "0")
    try:
        yield lab
    finally:
        lab.vgpu("sim", "down", codes=(0, 1))


def test_revalidation_runs_the_baseline_image_by_id_and_rebuilds_only_when_asked(
        lab: Lab) -> None:
    captured = lab.vgpu("revalidate", "--scenario", "6", "--capture-baseline",
                        "--baseline-series", "1", "--yes", *BENCH, codes=(0, 3, 4))
    assert "1 series per scenario: the baseline stores no spread" in captured
    [(tag, image_x)] = lab.images()
    assert image_x.startswith("sha256:")

    lab.vgpu("sim", "upgrade")
    held = lab.vgpu("revalidate", "--scenario", "6", "--yes", *BENCH, codes=(0, 3, 4))
    # a baseline of one series has no spread of its own: the default judges, and is named
    assert "stored no spread of its own" in held and "uncalibrated default 2.0%" in held
    [(tag_held, image_held)] = lab.images()
    assert (tag_held, image_held) == (tag, image_x)  # the baseline's image, by its ID
    assert f"harness image held fixed: the baseline's {tag} ({image_x})" in held
    assert f"harness image held fixed: {tag} {image_x}, the baseline's" in held

    rebuilt = lab.vgpu("revalidate", "--scenario", "6", "--yes", "--rebuild-image", *BENCH,
                       codes=(0, 3, 4))
    [(tag_new, image_y)] = lab.images()
    assert image_y.startswith("sha256:") and image_y != image_x
    assert f"harness image changed: {tag} {image_x} -> {tag_new} {image_y}; with it:" in rebuilt
    assert "harness image held fixed" not in rebuilt

    # X is gone from the guests (the rebuild took its tag): held again, it is missing.
    lab.remove_image(image_x)
    missing = lab.vgpu("revalidate", "--scenario", "6", "--yes", *BENCH, codes=(1,))
    assert f"the harness image held fixed, {tag} ({image_x}), is not on the guest" in missing
    assert "docker load" in missing and "--rebuild-image" in missing
    assert "COULD NOT RUN" in missing

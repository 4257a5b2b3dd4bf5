"""Revalidation's preflight phase says where a host's VIB is not the inventory's
drivers.host_driver_version: provisioning judges the driver each guest runs against that."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from tests.labs.vcsim import VcsimLab, vcsim_lab
from vgpu.model.load import load_inventory
from vgpu.revalidate.preflight import HostPin, run_preflight_phase
from vgpu.sim.lab import VIB_VERSION

__all__ = ["vcsim_lab"]
pytestmark = [pytest.mark.vcsim]


def test_a_host_vib_other_than_the_inventory_s_is_a_note(vcsim_lab: VcsimLab,
                                                          tmp_path: Path) -> None:
    path = vcsim_lab.write_inventory(tmp_path / "inv.yaml", extra={"drivers": {
        "host_driver_version": "570.133.10"}})
    phase = run_preflight_phase(load_inventory(path), path, [], tmp_path / "facts",
                                Console(file=io.StringIO()), HostPin())
    assert any(f"host driver VIB {VIB_VERSION} is not the inventory's "
               "drivers.host_driver_version 570.133.10" in note for note in phase.notes)

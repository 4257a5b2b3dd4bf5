"""Preflight of a whole-GPU passthrough scenario on the simulator lab: no vGPU checks
(passthrough needs no host driver, vGPU types or Shared Direct), each planned GPU must be
active in passthrough, and a GPU that looks left in MIG mode gets a note."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.invoke import run_cli
from tests.labs.vcsim import VcsimLab, lab_available
from vgpu.sim.lab import LabShape, gpu_pci_ids

pytestmark = [pytest.mark.vcsim,
              pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))]

REPO = Path(__file__).resolve().parents[3]
PT4 = str(REPO / "scenarios" / "passthrough_4gpu.yaml")


def preflight(lab: VcsimLab, tmp_path: Path, hosts: list[str]) -> tuple[int, dict, str]:
    inventory = lab.write_inventory(tmp_path / "inv.yaml", hosts=hosts)
    code, out, err = run_cli(["preflight", "-i", str(inventory), PT4, "--results-dir",
                              str(tmp_path / "pf"), "--json"])
    return code, json.loads(out), err


def checks_of(report: dict) -> dict[str, dict]:
    """The host's checks, then the scenario's (a scenario check wins on a shared name)."""
    return {c["name"]: c for h in report["hosts"] for c in h["checks"]} | \
        {c["name"]: c for c in report["scenario_checks"]}


def host_checks_of(report: dict) -> dict[str, dict]:
    return {c["name"]: c for h in report["hosts"] for c in h["checks"]}


def test_passthrough_scenario_passes_on_a_host_without_vgpu_driver_with_gpus_in_passthrough(
    tmp_path: Path,
) -> None:
    # Host 1: no NVIDIA VIB, no vGPU types, its four GPUs active in passthrough.
    with VcsimLab(LabShape(hosts=2, no_vgpu_hosts=1, passthrough_hosts=(1,))) as lab:
        code, report, err = preflight(lab, tmp_path, ["DC0_C0_H1"])
        assert code == 0, err
        checks = host_checks_of(report)
        for name in ("vGPU types", "MIG-backed types", "graphics default", "host driver"):
            assert checks[name]["ok"]
            assert checks[name]["detail"] == "not needed: the scenario passes whole GPUs through"
        assert checks_of(report)["passthrough GPUs"] == {
            "name": "passthrough GPUs", "ok": True,
            "detail": "4 planned GPU(s) active in passthrough"}
        assert not [n for n in report["notes"] if "looks left in MIG mode" in n]


def test_passthrough_scenario_fails_where_the_gpus_are_not_in_passthrough(
    vcsim_lab: VcsimLab, tmp_path: Path,
) -> None:
    code, report, _ = preflight(vcsim_lab, tmp_path, ["DC0_C0_H0"])
    assert code == 1
    check = checks_of(report)["passthrough GPUs"]
    assert not check["ok"]
    pci = gpu_pci_ids(1)[0]
    assert f"DC0_C0_H0 GPU 0 ({pci}) for pt4-vm: passthrough is capable, off: run on the " \
           f"host `esxcli hardware pci pcipassthru set -d {pci} -e true -a`" in check["detail"]


def test_a_passed_through_gpu_that_looks_in_mig_mode_gets_a_note(tmp_path: Path) -> None:
    # The host still offers MIG-backed types for the GPUs' board: MIG mode is on.
    with VcsimLab(LabShape(hosts=1, passthrough_hosts=(0,))) as lab:
        code, report, err = preflight(lab, tmp_path, ["DC0_C0_H0"])
        assert code == 0, err
        notes = [n for n in report["notes"] if "looks left in MIG mode" in n]
        assert len(notes) == 4
        assert notes[0].startswith(f"DC0_C0_H0 GPU 0 ({gpu_pci_ids(1)[0]}) for pt4-vm: the "
                                   "GPU looks left in MIG mode (the host offers MIG-backed "
                                   "vGPU types for its board)")

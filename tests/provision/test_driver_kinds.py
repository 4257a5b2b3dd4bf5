"""guest.driver chooses the installer: a passthrough scenario (guest.driver: datacenter)
gets the data-center .run from drivers.datacenter_driver and no gridd configuration; a
vGPU scenario gets the -grid.run from drivers.guest_driver."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.labs.connect import FAST
from tests.labs.fixtures import ssh_lab
from tests.labs.sshlab import SshLab, lab_host_targets
from tests.provision.lab_jobs import driver_files, scenario_jobs, sim_inventory
from vgpu.errors import InputError
from vgpu.model.inventory import Inventory
from vgpu.provision.fanout import Job, preflight, provision_all
from vgpu.provision.step import Outcome

ROOT = Path(__file__).resolve().parents[2]
def test_passthrough_guests_get_the_datacenter_driver_and_vgpu_guests_the_grid_one(
        tmp_path: Path) -> None:
    files = driver_files(tmp_path)
    inv = sim_inventory(**files)
    passthrough = scenario_jobs("passthrough_1gpu", inv, tmp_path)[0].requirements
    assert (passthrough.driver_kind, passthrough.driver_source) == \
        ("datacenter", files["datacenter_driver"])
    assert passthrough.driver_source.endswith("NVIDIA-Linux-x86_64-550.54.15.run")
    assert "vgpu-licensing" not in passthrough.steps
    bare_metal = Inventory.model_validate({
        "name": "bm", "drivers": files, "network": {"ip_pool": {"start": "10.0.0.1",
                                                                 "end": "10.0.0.1"}},
        "bare_metal": [{"name": "gpu1", "address": "10.1.1.1",
                        "gpus": [{"model": "A100-80GB", "count": 4}]}]})
    bare = scenario_jobs("bm_passthrough_4gpu", bare_metal, tmp_path)
    assert [j.target.name for j in bare] == ["gpu1"]
    assert {j.requirements.driver_source for j in bare} == {files["datacenter_driver"]}
    vgpu = scenario_jobs("mig_7x1g", inv, tmp_path)[0].requirements
    assert (vgpu.driver_kind, vgpu.driver_source) == ("vgpu-guest", files["guest_driver"])
    assert "vgpu-licensing" in vgpu.steps


def test_datacenter_scenario_refuses_a_missing_or_grid_driver(tmp_path: Path) -> None:
    files = driver_files(tmp_path)
    missing = scenario_jobs("passthrough_1gpu",
                            sim_inventory(guest_driver=files["guest_driver"]), tmp_path)
    with pytest.raises(InputError) as info:
        preflight(missing, "lab.yaml")
    assert "lab.yaml drivers.datacenter_driver: host pt1-vm, step nvidia-driver: no NVIDIA " \
           "data-center driver (.run file or URL) given" in str(info.value)
    grid = scenario_jobs("passthrough_1gpu",
                         sim_inventory(datacenter_driver=files["guest_driver"]), tmp_path)
    with pytest.raises(InputError) as info:
        preflight(grid, "lab.yaml")
    assert "is the vGPU guest driver (-grid.run), but the scenario's guest.driver is " \
           "datacenter" in str(info.value)
    assert info.value.exit_code == 2


def _passthrough_gpu(lab: SshLab) -> None:
    # What a passthrough VM's nvidia-smi shows: the GPU itself, no vGPU type.
    lab.hosts[0].set_sim("hardware", "gpu_name=NVIDIA A100 80GB PCIe\nmig_profile=\n"
                         "gpu_uuid=3f1c8a52-0000-4000-8000-000000000001\n")


lab = ssh_lab(1, prepare=_passthrough_gpu)


@pytest.mark.sshd
def test_passthrough_vm_is_provisioned_with_the_datacenter_installer(
        lab: SshLab, tmp_path: Path) -> None:
    files = driver_files(tmp_path)
    job = scenario_jobs("passthrough_1gpu", sim_inventory(**files), tmp_path)[0]
    host = lab.hosts[0]
    assert job.target.address == host.address
    req = dataclasses.replace(job.requirements, steps=("os-facts", "nvidia-driver",
                                                       "verify-gpu"))
    report = provision_all([Job(lab_host_targets(lab)(job.target), req)], options=FAST,
                           log_dir=tmp_path / "logs", state_dir=tmp_path / "state",
                           concurrency=1)
    assert report.exit_code == 0, report.failure_lines()
    assert report.hosts[0].step("nvidia-driver").outcome is Outcome.CHANGED
    assert report.hosts[0].step("verify-gpu").detail == "NVIDIA A100 80GB PCIe"
    assert (host.sim_state / "driver_flavour").read_text().strip() == "datacenter"
    assert not (host.system_root / "etc" / "nvidia").exists()
    log = (tmp_path / "logs" / "pt1-vm.log").read_text()
    assert "NVIDIA-Linux-x86_64-550.54.15.run" in log and "-grid.run" not in log
    assert "gridd" not in log

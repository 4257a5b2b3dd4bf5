"""The driver a guest runs is judged against the VIB of the host vCenter reports its VM on:
on the simulator's two hosts, one upgraded in place to another VIB (as in a rolling
upgrade), a guest on the upgraded host is judged against the new VIB and a guest on the
other host against the old one, whatever drivers.host_driver_version says (also through the
nvidia-driver step itself, on SSH lab guests named as the VMs); where vCenter cannot be
asked, the inventory's VIB is used and the output says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.labs.connect import FAST
from tests.labs.sshlab import SshLab
from tests.labs.sshlab import lab_available as ssh_lab_available
from tests.labs.vcsim import VcsimLab, lab_available
from tests.provision.lab_jobs import GA_KERNEL, jobs, requirements
from vgpu.model.load import load_inventory
from vgpu.provision.fanout import Job, provision_all
from vgpu.provision.host_drivers import judge_against_guest_hosts
from vgpu.provision.requirements import GuestRequirements
from vgpu.provision.running_driver import judge_running_driver
from vgpu.provision.step import Outcome
from vgpu.remote.targets import HostTarget
from vgpu.sim.hostupgrade import HostUpgrade, upgrade_host
from vgpu.sim.lab import VIB_VERSION, LabShape

pytestmark = [pytest.mark.vcsim,
              pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))]

H0, H1 = "DC0_C0_H0", "DC0_C0_H1"
NEW_VIB = "550.90.05-1OEM.800.1.0.20613240"
VIB_570 = "570.133.10-1OEM.800.1.0.20613240"
STEPS = ("os-facts", "nvidia-driver", "vgpu-licensing", "verify-gpu")
DRIVERS: dict[str, object] = {"drivers": {"host_driver_version": VIB_VERSION}}
RUNNING = "550.90.07"  # the guests' driver after the guest driver change: branch 550


def _job(vm: str, inventory_vib: str | None) -> Job:
    return Job(HostTarget(name=vm, address="127.0.0.1", user="vgpu"),
               GuestRequirements(steps=("os-facts", "nvidia-driver"),
                                 host_driver_version=inventory_vib))


def _judged(jobs: list[Job]) -> dict[str, str | None]:
    """Each guest's verdict as the nvidia-driver step makes it: None runs, else why not."""
    out = {}
    for job in jobs:
        req = job.requirements
        assert req.host_driver_version is not None
        problem = judge_running_driver(job.target.name, RUNNING, req.host_driver_version,
                                       req.compatible_guest_branches, req.host_name)
        out[job.target.name] = None if problem is None else problem.message
    return out


def test_each_guest_is_judged_against_the_vib_of_the_host_it_runs_on(tmp_path: Path) -> None:
    with VcsimLab(LabShape(hosts=2, gpus_per_host=1)) as lab:
        lab.set_maintenance(H1, True)
        upgrade_host(lab.url, lab.shape.username, lab.running.password, lab.ca_file,
                     HostUpgrade(H1, "24022510", NEW_VIB))
        lab.set_maintenance(H1, False)
        lab.make_foreign_vm("guest-old", H0)
        lab.make_foreign_vm("guest-new", H1)
        path = lab.write_inventory(tmp_path / "inventory.yaml", extra=DRIVERS)
        inventory = load_inventory(path)
        # The inventory still names the VIB every host ran before the upgrade.
        assert inventory.drivers.host_driver_version == VIB_VERSION
        jobs = [_job("guest-old", VIB_VERSION), _job("guest-new", VIB_VERSION)]
        judged_jobs, notes = judge_against_guest_hosts(jobs, inventory, path)
    assert notes == []
    by_vm = {j.target.name: j.requirements for j in judged_jobs}
    assert (by_vm["guest-new"].host_name, by_vm["guest-new"].host_driver_version) == \
        (H1, NEW_VIB)
    assert (by_vm["guest-old"].host_name, by_vm["guest-old"].host_driver_version) == \
        (H0, VIB_VERSION)
    verdicts = _judged(judged_jobs)
    assert verdicts["guest-new"] is None  # a 550 manager runs a 550 guest
    assert verdicts["guest-old"] == (
        f"guest-old runs NVIDIA guest driver {RUNNING} (branch 550), which its host {H0}'s "
        f"vGPU Manager {VIB_VERSION} (branch 535) does not run: guest branch 550 is newer than "
        "the vGPU Manager's branch 535: never supported")


def test_without_vcenter_the_inventory_vib_is_used_and_said(tmp_path: Path) -> None:
    with VcsimLab(LabShape(hosts=1, gpus_per_host=1)) as lab:
        path = lab.write_inventory(tmp_path / "inventory.yaml", extra=DRIVERS)
    inventory = load_inventory(path)  # the simulator is gone: vCenter cannot be reached
    jobs = [_job("guest-a", VIB_VERSION)]
    judged_jobs, notes = judge_against_guest_hosts(jobs, inventory, path)
    assert judged_jobs == jobs
    [note] = notes
    assert note.startswith("vCenter could not be asked for each guest's host driver VIB (")
    assert note.endswith(f"running guest drivers are judged against "
                         f"drivers.host_driver_version {VIB_VERSION} from {path}")


def test_a_vm_vcenter_does_not_list_keeps_the_inventory_vib(tmp_path: Path) -> None:
    with VcsimLab(LabShape(hosts=1, gpus_per_host=1)) as lab:
        path = lab.write_inventory(tmp_path / "inventory.yaml", extra=DRIVERS)
        judged_jobs, notes = judge_against_guest_hosts([_job("gone", VIB_VERSION)],
                                                       load_inventory(path), path)
    assert judged_jobs[0].requirements.host_driver_version == VIB_VERSION
    assert notes == [f"gone: the host driver VIB is not known (vCenter lists no VM of that "
                     f"name); its running driver is judged against drivers.host_driver_version "
                     f"{VIB_VERSION}"]


@pytest.mark.sshd
@pytest.mark.skipif(ssh_lab_available() is not None, reason=str(ssh_lab_available()))
def test_the_driver_step_fails_only_the_guest_whose_host_vib_does_not_run_its_driver(
        tmp_path: Path) -> None:
    """Both guests run 535.154.05; H0 keeps its 535 VIB, H1 is upgraded to a 570 one, which
    runs guest branches 570 and 550 only. The inventory still names the 535 VIB."""
    with SshLab(2) as ssh, VcsimLab(LabShape(hosts=2, gpus_per_host=1)) as lab:
        for host in ssh.hosts:
            host.set_kernel(GA_KERNEL, nouveau=False)
        on_old, on_new = (h.name for h in ssh.hosts)
        lab.set_maintenance(H1, True)
        upgrade_host(lab.url, lab.shape.username, lab.running.password, lab.ca_file,
                     HostUpgrade(H1, "24022510", VIB_570))
        lab.set_maintenance(H1, False)
        lab.make_foreign_vm(on_old, H0)
        lab.make_foreign_vm(on_new, H1)
        path = lab.write_inventory(tmp_path / "inventory.yaml", extra=DRIVERS)
        req = requirements(tmp_path / "files", steps=STEPS, reboot_timeout_s=60,
                           host_driver_version=VIB_VERSION)
        judged_jobs, notes = judge_against_guest_hosts(jobs(ssh, req), load_inventory(path),
                                                       path)
        assert notes == []
        report = provision_all(judged_jobs, options=FAST, log_dir=tmp_path / "logs",
                               state_dir=tmp_path / "state", concurrency=2)
    steps = {h.host: h.step("nvidia-driver") for h in report.hosts}
    assert steps[on_old].outcome is Outcome.CHANGED  # installed; 535 runs under 535
    assert steps[on_new].outcome is Outcome.FAILED
    failure = "\n".join(report.failure_lines())
    assert f"{on_new} runs NVIDIA guest driver 535.154.05 (branch 535), which its host " \
        f"{H1}'s vGPU Manager {VIB_570} (branch 570) does not run" in failure
    assert f"install the branch-535 host driver VIB on {H1}" in failure
    assert on_old not in failure

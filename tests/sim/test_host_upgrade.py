"""One host of the simulator lab upgraded in place (vgpu.sim.hostupgrade), read back the
way preflight reads any host: only a host in maintenance mode takes the upgrade; without
the reboot it reports a reboot pending and still runs its old build while the new VIB is
installed; the reboot runs the new build and moves its boot time; the other host and every
hardware UUID stay as they were."""

from __future__ import annotations

import time

import pytest

from tests.labs.vcsim import VcsimLab, lab_available
from vgpu.errors import InputError, ParameterError
from vgpu.sim.hostupgrade import NOT_DRAINED, HostUpgrade, upgrade_host
from vgpu.sim.lab import ESXI_BUILD, VIB_VERSION, LabShape
from vgpu.vsphere.connect.connection import connect
from vgpu.vsphere.connect.tasks import call
from vgpu.vsphere.plan.reconcile import read_state
from vgpu.vsphere.preflight.checks import reboot_note
from vgpu.vsphere.read.facts import HostFacts, read_host_drivers

pytestmark = [pytest.mark.vcsim,
              pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))]

H0, H1 = "DC0_C0_H0", "DC0_C0_H1"
NEW = HostUpgrade(H1, "24022510", "550.90.05-1OEM.800.1.0.20613240", reboot=False)


def _hosts(lab: VcsimLab) -> dict[str, HostFacts]:
    with connect(lab.target()) as session:
        hosts = read_state(session, lab.placement_names()).hosts
        read_host_drivers(hosts)
    return hosts


def _upgrade(lab: VcsimLab, upgrade: HostUpgrade) -> str:
    return upgrade_host(lab.url, lab.shape.username, lab.running.password, lab.ca_file,
                        upgrade)


def test_one_host_upgrades_in_place_with_its_reboot_pending_then_done() -> None:
    with VcsimLab(LabShape(hosts=2, gpus_per_host=1)) as lab:
        with pytest.raises(InputError) as refused:
            _upgrade(lab, NEW)
        assert "not in maintenance mode" in str(refused.value)
        # The fact, in the domain's terms: the CLI words the fix with its flags.
        assert isinstance(refused.value, ParameterError)
        assert (refused.value.reason, refused.value.details) == (NOT_DRAINED, {"host": H1})
        assert "--" not in str(refused.value)
        with connect(lab.target()) as session:
            host = read_state(session, lab.placement_names()).hosts[H1]
            call("enter maintenance mode", host.ref.EnterMaintenanceMode_Task, 0)
        before = _hosts(lab)

        _upgrade(lab, NEW)
        pending = _hosts(lab)
        assert pending[H1].reboot_required is True
        assert pending[H1].build == ESXI_BUILD  # the old build runs until the reboot
        assert pending[H1].host_driver is not None
        assert pending[H1].host_driver.version == NEW.vib_version  # installed
        assert pending[H1].boot_time == before[H1].boot_time
        assert f"{H1}: reboot pending: host driver VIB {NEW.vib_version} is installed, " \
            "not running" in (reboot_note(pending[H1]) or "")

        time.sleep(1.1)  # boot times are read to the second
        _upgrade(lab, HostUpgrade(H1, NEW.esxi_build, NEW.vib_version))
        after = _hosts(lab)
    assert after[H1].reboot_required is False and after[H1].build == NEW.esxi_build
    assert reboot_note(after[H1]) is None
    assert (after[H1].boot_time or "") > (before[H1].boot_time or "")
    assert after[H1].in_maintenance  # a reboot does not take the host out of maintenance
    assert after[H0].build == ESXI_BUILD and after[H0].boot_time == before[H0].boot_time
    assert after[H0].host_driver is not None and after[H0].host_driver.version == VIB_VERSION
    assert after[H0].hardware_uuid != after[H1].hardware_uuid
    assert after[H1].hardware_uuid == before[H1].hardware_uuid

"""Logging in to the simulator: TLS verification, credentials, reachability, and finding
the objects an inventory names."""

from __future__ import annotations

import socket

import pytest

from tests.labs.vcsim import VcsimLab, lab_available
from vgpu.errors import InputError, RemoteError
from vgpu.sim.lab import LabShape
from vgpu.vsphere.connect.connection import VCenterTarget, connect, resolve_placement

pytestmark = [pytest.mark.vcsim,
              pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))]


def test_verified_tls_login_reads_the_simulated_vcenter(vcsim_lab: VcsimLab) -> None:
    with connect(vcsim_lab.target()) as session:
        assert session.content.about.apiType == "VirtualCenter"
        placement = resolve_placement(session, vcsim_lab.placement_names())
        assert sorted(placement.hosts) == ["DC0_C0_H0", "DC0_C0_H1"]
        assert placement.template.config.template is True
        assert placement.datastore.name == "LocalDS_0"


def test_unknown_certificate_is_refused_unless_verification_is_turned_off(
    vcsim_lab: VcsimLab,
) -> None:
    with (pytest.raises(RemoteError, match=r"could not be verified.*ca_bundle.*verify_tls"),
          connect(vcsim_lab.target(ca_bundle=None))):
        pass
    with connect(vcsim_lab.target(ca_bundle=None, verify_tls=False)) as session:
        assert session.content.about.apiType == "VirtualCenter"


def test_wrong_password_is_an_input_error_naming_the_user(vcsim_lab: VcsimLab) -> None:
    with pytest.raises(InputError) as caught, \
            connect(vcsim_lab.target(password="not-the-password")):
        pass
    text = str(caught.value)
    assert "refused the login of user 'user'" in text
    assert "vcenter.user / vcenter.password" in text
    assert caught.value.exit_code == 2


def test_unreachable_vcenter_is_a_remote_error_naming_the_address() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound but not listening: connections are refused
        port = sock.getsockname()[1]
        target = VCenterTarget(host="127.0.0.1", port=port, user="u", password="p",
                               source="inv.yaml", timeout_s=5)
        expected = rf"cannot reach vCenter at https://127.0.0.1:{port}"
        with pytest.raises(RemoteError, match=expected), connect(target):
            pass


@pytest.mark.parametrize(("field", "value", "listed"), [
    ("datacenter", "HPC-Lab", "DC0"),
    ("cluster", "GPU-Cluster", "DC0_C0"),
    ("datastore", "vsanDatastore", "LocalDS_0"),
    ("network", "VM-100G", "VM Network"),
    ("template", "ubuntu-efi", "vgpu-template"),
])
def test_missing_placement_object_names_what_exists(
    vcsim_lab: VcsimLab, field: str, value: str, listed: str,
) -> None:
    names = vcsim_lab.placement_names(**{field: value})
    with connect(vcsim_lab.target()) as session, pytest.raises(InputError) as caught:
        resolve_placement(session, names)
    text = str(caught.value)
    assert f"placement.{field}" in text
    assert f"'{value}'" in text
    assert listed in text


def test_plain_http_lab_logs_in_without_tls() -> None:
    with VcsimLab(LabShape(tls=False)) as lab:
        assert lab.url.startswith("http://")
        with connect(lab.target()) as session:
            assert session.content.about.apiType == "VirtualCenter"


def test_vcenter_going_away_mid_session_is_a_remote_error_naming_it() -> None:
    with VcsimLab(LabShape(hosts=1)) as lab, \
            pytest.raises(RemoteError, match=r"vCenter https://127.0.0.1:\d+: "), \
            connect(lab.target()) as session:
        lab.running.stop()
        resolve_placement(session, lab.placement_names())

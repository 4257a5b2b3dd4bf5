"""Trusting vCenter: a certificate pinned by its SHA-256 thumbprint (`vgpu inventory
trust`), a changed certificate refused naming both thumbprints, plain http only when
the inventory says so."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml

from tests.cli.invoke import run_cli
from tests.labs.vcsim import VcsimLab, lab_available
from vgpu.cli.inventory import with_pin
from vgpu.errors import InputError, RemoteError
from vgpu.model.inventory import VCenter
from vgpu.model.load import load_inventory
from vgpu.vsphere.connect.connection import VCenterTarget, connect, insecurity_warnings
from vgpu.vsphere.connect.from_inventory import target_from_inventory

PIN = "sha256:" + "ab" * 32


def vcenter(**values: object) -> VCenter:
    return VCenter.model_validate({"host": "vc", "user": "vgpu@vsphere.local",
                                   "password": {"env": "X"}, **values})


def test_a_thumbprint_is_read_with_or_without_colons_and_in_any_case() -> None:
    colons = ":".join(["AB"] * 32)
    assert vcenter(thumbprint=f"SHA256:{colons}").thumbprint == PIN
    assert vcenter(thumbprint="ab" * 32).thumbprint == PIN
    with pytest.raises(ValueError, match="not a SHA-256 certificate thumbprint"):
        vcenter(thumbprint="sha1:" + "ab" * 20)


def test_plain_http_needs_insecure_http_and_a_pin_cannot_be_unverified() -> None:
    with pytest.raises(ValueError, match="password unencrypted"):
        vcenter(protocol="http")
    assert vcenter(protocol="http", insecure_http=True).insecure_http
    with pytest.raises(ValueError, match="verify_tls: false turns checking off"):
        vcenter(thumbprint=PIN, verify_tls=False)


def test_every_run_warns_of_http_and_of_verification_off() -> None:
    base = {"host": "vc", "user": "u", "password": "p", "source": "inv.yaml"}
    assert insecurity_warnings(VCenterTarget(**base)) == []  # type: ignore[arg-type]
    (off,) = insecurity_warnings(VCenterTarget(**base, verify_tls=False))  # type: ignore[arg-type]
    assert "not verified" in off and "vgpu inventory trust" in off
    (http,) = insecurity_warnings(VCenterTarget(**base, protocol="http",  # type: ignore[arg-type]
                                                insecure_http=True))
    assert "plain http" in http and "unencrypted" in http
    with pytest.raises(InputError, match="insecure_http: true"), \
            connect(VCenterTarget(**base, protocol="http")):  # type: ignore[arg-type]
        pass


def test_the_pin_goes_under_vcenter_and_replaces_verification_off() -> None:
    text = ("name: lab  # mine\nvcenter:\n    host: vc\n    verify_tls: false  # lab\n"
            "    user: u\nplacement:\n  datacenter: DC\n")
    pinned = with_pin(text, PIN, "inv.yaml")
    assert pinned.splitlines()[2] == f"    thumbprint: {PIN}"
    assert "    # verify_tls: false  # lab  (replaced by the thumbprint pin)" in pinned
    assert yaml.safe_load(pinned)["vcenter"] == {"host": "vc", "thumbprint": PIN, "user": "u"}
    again = with_pin(pinned, "sha256:" + "cd" * 32, "inv.yaml")
    assert again.count("thumbprint:") == 1 and ("cd" * 32) in again
    with pytest.raises(InputError, match="no block-style"):
        with_pin("vcenter: {host: vc}\n", PIN, "inv.yaml")


@pytest.mark.vcsim
@pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))
def test_trust_pins_the_lab_certificate_and_a_changed_one_is_refused(
        vcsim_lab: VcsimLab, tmp_path: Path) -> None:
    data = vcsim_lab.inventory_data()
    del data["vcenter"]["ca_bundle"]  # type: ignore[index]
    inventory = tmp_path / "lab.yaml"
    inventory.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    # Unverifiable: the advice is the CA bundle or the pin, verification off only last.
    with pytest.raises(RemoteError) as refused, \
            connect(target_from_inventory(load_inventory(inventory), inventory)):
        pass
    advice = str(refused.value)
    assert advice.index("ca_bundle") < advice.index("vgpu inventory trust") \
        < advice.index("verify_tls: false")

    code, out, err = run_cli(["inventory", "trust", "-i", str(inventory), "--yes"])
    assert code == 0, err
    assert vcsim_lab.ca_file is not None
    der = _der(vcsim_lab.ca_file)
    thumbprint = "sha256:" + hashlib.sha256(der).hexdigest()
    assert "subject:    CN=vgpu vcsim lab,O=vgpu" in out
    assert "issuer:     CN=vgpu vcsim lab,O=vgpu" in out and "valid to:" in out
    assert f"thumbprint: {thumbprint}" in out
    loaded = load_inventory(inventory)
    assert loaded.vcenter is not None and loaded.vcenter.thumbprint == thumbprint
    with connect(target_from_inventory(loaded, inventory)) as session:
        assert session.content.about.apiType == "VirtualCenter"

    inventory.write_text(inventory.read_text().replace(thumbprint, PIN), encoding="utf-8")
    with pytest.raises(RemoteError) as changed, \
            connect(target_from_inventory(load_inventory(inventory), inventory)):
        pass
    assert f"presents {thumbprint}" in str(changed.value)
    assert f"pins {PIN}" in str(changed.value)
    code, out, _ = run_cli(["inventory", "trust", "-i", str(inventory), "--yes"])
    assert code == 0 and f"CHANGED: {inventory} pins {PIN}" in out


def _der(pem_file: Path) -> bytes:
    import ssl
    return ssl.PEM_cert_to_DER_cert(pem_file.read_text())

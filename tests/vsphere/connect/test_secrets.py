"""Secrets stay in memory: a password file group or others may read is refused, and a
marker password used by every command that can run on the simulated lab is found in no
byte vgpu writes (files, the results store, stdout and stderr)."""

from __future__ import annotations

import base64
import secrets
from pathlib import Path

import pytest
import yaml

from tests.cli.invoke import run_cli
from tests.labs.vcsim import VcsimLab, lab_available
from tests.results.series import Repeat, instance, record_series
from vgpu.errors import InputError
from vgpu.model.load import load_inventory
from vgpu.results.store.result_store import ResultStore
from vgpu.vsphere.connect.from_inventory import target_from_inventory

REPO = Path(__file__).resolve().parents[3]
SCENARIO_8 = str(REPO / "scenarios" / "mig_7x1g.yaml")


def _inventory(folder: Path, password_file: Path) -> Path:
    path = folder / "inv.yaml"
    path.write_text(yaml.safe_dump({
        "name": "lab", "vcenter": {"host": "vc.example", "user": "vgpu@vsphere.local",
                                   "password": {"file": str(password_file)}},
        "placement": {"datacenter": "DC", "datastore": "DS", "network": "N",
                      "template": "T"}}), encoding="utf-8")
    return path


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_a_password_file_group_or_others_may_read_is_refused_naming_chmod_600(
        tmp_path: Path, mode: int) -> None:
    password_file = tmp_path / "vc.pw"
    password_file.write_text("not-to-be-read\n", encoding="utf-8")
    password_file.chmod(mode)
    inventory = _inventory(tmp_path, password_file)
    with pytest.raises(InputError) as refused:
        target_from_inventory(load_inventory(inventory), inventory)
    text = str(refused.value)
    assert refused.value.exit_code == 2
    assert str(password_file) in text and f"mode {mode:04o}" in text
    assert f"chmod 600 {password_file}" in text
    password_file.chmod(0o600)
    assert target_from_inventory(load_inventory(inventory), inventory).password == \
        "not-to-be-read"


def test_the_cli_exits_2_on_a_world_readable_password_file(tmp_path: Path) -> None:
    password_file = tmp_path / "vc.pw"
    password_file.write_text("not-to-be-read\n", encoding="utf-8")
    password_file.chmod(0o644)
    code, _, err = run_cli(["preflight", "-i", str(_inventory(tmp_path, password_file))])
    assert code == 2
    assert "chmod 600" in err and "vc.pw" in err


def _store_a_series(db: Path) -> list[int]:
    """Two stored repeats, so that report and exports have results to write."""
    with ResultStore.open(db) as store:
        return record_series(
            store, [Repeat([instance("s8-1g-1", 100.0 + i, 5.0)]) for i in range(2)],
            series_id="s-scan", scenario_id="8", workload="resnet50",
            workload_detail={"loadgen_scenario": "Offline"}).run_ids


@pytest.mark.vcsim
@pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))
def test_the_marker_password_reaches_no_byte_vgpu_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = f"vgpu-marker-{secrets.token_hex(12)}"
    sudo_marker = f"sudo-marker-{secrets.token_hex(12)}"
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    db = work / "vgpu-results.db"
    monkeypatch.setenv("VGPU_DB", str(db))
    monkeypatch.delenv("VGPU_AUDIT_DB")  # the audit trail goes to the results store
    outputs: list[str] = []

    def vgpu(*args: str, ok: tuple[int, ...] = (0,)) -> str:
        code, out, err = run_cli(list(args))
        outputs.extend([out, err])
        assert code in ok, f"vgpu {' '.join(args)}: {code}\n{out}\n{err}"
        return out

    with VcsimLab(password=marker) as lab:
        sudo_file = tmp_path / "sudo.pw"
        sudo_file.write_text(sudo_marker + "\n", encoding="utf-8")
        sudo_file.chmod(0o600)
        inventory = lab.write_inventory(work / "inv.yaml", extra={
            "ssh": {"user": "vgpu", "sudo_password": {"file": str(sudo_file)}}})
        assert lab.password_file.read_text().strip() == marker
        vgpu("preflight", "-i", str(inventory), "--scenario", "8")
        vgpu("apply", "--no-provision", SCENARIO_8, "-i", str(inventory), "--yes")
        first, second = _store_a_series(db)
        vgpu("results")
        outputs.append(vgpu("results", "--export", "json"))
        outputs.append(vgpu("results", "--export", "csv"))
        vgpu("results", "--export", "mlperf", str(work / "mlperf"), "--submitter", "lab",
             ok=(0, 1, 2))
        vgpu("compare", str(second), str(first), "--kind", "scenario-vs-scenario",
             "--junit", str(work / "junit.xml"), ok=(0, 3, 4))
        vgpu("report", "--out", str(work / "report.html"), "--markdown",
             str(work / "report.md"))
        vgpu("destroy", "--scenario", "8", "-i", str(inventory), "--yes")
        assert "power on of VM s8-1g-1 -> success" in vgpu("audit")

    written = [p for p in work.rglob("*") if p.is_file()]
    assert db in written and (work / "report.html") in written
    assert (work / "junit.xml") in written
    blobs = [p.read_bytes() for p in written] + [text.encode() for text in outputs]
    for secret in (marker, sudo_marker):
        for form in (secret.encode(), base64.b64encode(secret.encode())):
            leaks = [str(p) for p, blob in zip(written, blobs, strict=False) if form in blob]
            assert not leaks and not any(form in blob for blob in blobs), leaks

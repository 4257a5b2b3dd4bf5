"""`vgpu apply` checks everything it will need before it reaches vCenter: a layout that
cannot fit even on empty GPUs, and the inputs provisioning needs afterwards. The
inventory points vCenter at a closed loopback port, so any connection attempt would show
as a connection failure (exit 1) instead of the input error (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.invoke import run_cli

INVENTORY = """\
name: closed
vcenter: {host: 127.0.0.1, port: 9, user: u, password: {env: VGPU_TEST_PW}}
placement: {datacenter: DC, datastore: DS, network: N, template: t}
hosts:
  - name: esx1
    gpus: [{model: A100-80GB, count: 1}]
network:
  ip_pool: {start: 127.0.0.11, end: 127.0.0.40, netmask: 255.0.0.0, gateway: 127.0.0.1}
ssh: {user: vgpu}
"""

TOO_BIG = """\
id: too-big
name: too-big
gpu: A100-80GB
vms:
  - {name: big, vgpus: [4g.40gb]}
  - {name: other, vgpus: [4g.40gb]}
workloads: [{model: resnet50}]
"""


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_layout_that_cannot_fit_is_refused_before_any_connection(tmp_path: Path) -> None:
    inventory = _write(tmp_path, "inv.yaml", INVENTORY)
    scenario = _write(tmp_path, "big.yaml", TOO_BIG)
    for extra in (["--dry-run"], ["--yes"]):
        code, _, err = run_cli(["apply", scenario, "-i", inventory, *extra])
        assert code == 2, err
        assert f"{scenario}" in err or inventory in err
        assert "no room for VM other" in " ".join(err.split())
        assert "connect" not in err.lower()


def test_missing_provisioning_inputs_are_refused_before_vcenter(tmp_path: Path) -> None:
    inventory = _write(tmp_path, "inv.yaml", INVENTORY)
    code, _, err = run_cli(["apply", "--scenario", "8", "-i", inventory, "--yes"])
    text = " ".join(err.split())
    assert code == 2, err
    # One grouped line per problem shared by the seven VMs, naming the inventory file.
    assert text.count("drivers.guest_driver:") == 1, text
    assert f"{inventory} drivers.guest_driver: 7 hosts (s8-1g-1, s8-1g-2, s8-1g-3, s8-1g-4 " \
           "and 3 more), step nvidia-driver" in text
    assert text.count("drivers.licence_token:") == 1
    assert "--no-provision" in text and "no VM was created or changed" in text


def test_dry_run_notes_what_provisioning_would_refuse(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VGPU_TEST_PW", "x")
    inventory = _write(tmp_path, "inv.yaml", INVENTORY)
    code, out, err = run_cli(["apply", "--scenario", "8", "-i", inventory, "--dry-run"])
    # The notes come before vCenter is read; the closed port then fails the connection.
    assert "provisioning would be refused" in out and "drivers.guest_driver" in out
    assert code == 1, (out, err)


@pytest.mark.parametrize("command", ["apply", "provision"])
def test_parallel_is_the_concurrency_bound_and_out_of_range_is_refused(
    tmp_path: Path, command: str,
) -> None:
    inventory = _write(tmp_path, "inv.yaml", INVENTORY)
    code, _, err = run_cli([command, "--scenario", "8", "-i", inventory, "--parallel", "0"])
    assert code == 2
    assert "'--concurrency' / '--parallel'" in err and "greater than or equal to 1" in \
        " ".join(err.replace("│", " ").split())

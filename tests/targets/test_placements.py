"""A scenario's placements on an inventory's bare-metal hosts: each tenant with the SSH
target it is reached by, read straight from the inventory, the same target provisioning
reaches that host by; a local host is this machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from vgpu import catalog
from vgpu.errors import InputError
from vgpu.model.load import load_inventory
from vgpu.provision.adapter import jobs_from_plan
from vgpu.site import Site
from vgpu.targets.placements import NO_GPU, bare_metal_placements, scenario_placements

LAB = catalog.default_inventory_dir() / "lab.example.yaml"
TWO_HOSTS = """\
name: two-hosts
ssh: {user: ubuntu, key_file: keys/lab_ed25519, known_hosts: keys/known_hosts}
bare_metal:
  - name: here
    address: local
    gpus: [{model: A100-80GB, count: 1}]
  - name: there
    address: 10.0.0.2
    ssh: {user: ops, port: 2222, key_file: keys/there_ed25519}
    gpus: [{model: A100-80GB, count: 1}]
"""


def test_bare_metal_tenants_are_reached_as_provisioning_reaches_their_host() -> None:
    sc = catalog.load("bm6")
    site = Site(inventory_path=LAB, inventory=load_inventory(LAB), how="--inventory")
    placements = scenario_placements(sc, site)
    plan = site.plan(sc)
    assert [p.instance for p in placements] == [vm.name for vm in plan.vms]
    [job] = jobs_from_plan(plan, sc, load_inventory(LAB), inventory_dir=LAB.parent)
    assert {p.host_target for p in placements} == {job.target}
    reach = placements[0].host_target
    assert reach is not None
    assert (reach.name, reach.address, reach.user) == (
        "r750xa-03.lab.example.com", "10.20.30.13", "ubuntu")
    assert reach.jump is not None and reach.jump.user == "ops"
    assert [(p.target_kind, p.platform.attachment, p.platform.host) for p in placements] == [
        ("bare-metal", "none", "r750xa-03.lab.example.com")] * len(placements)
    assert [p.planned_slice for p in placements] == [
        "+".join(v.label for v in vm.vgpus) or NO_GPU for vm in plan.vms]


def test_a_local_host_is_this_machine_and_a_host_keeps_its_own_ssh(tmp_path: Path) -> None:
    path = tmp_path / "inventory.yaml"
    path.write_text(TWO_HOSTS)
    inventory = load_inventory(path)
    sc = catalog.load("train_bm_2")
    site = Site(inventory_path=path, inventory=inventory, how="--inventory")
    plan = site.plan(sc)
    placements = bare_metal_placements(sc, inventory, path, plan)
    by_host = {p.platform.host: p for p in placements}
    assert set(by_host) == {"here", "there"}
    assert by_host["here"].host_target is None
    there = by_host["there"].host_target
    assert there is not None
    assert (there.address, there.user, there.port) == ("10.0.0.2", "ops", 2222)
    assert there.key_file == tmp_path / "keys" / "there_ed25519"  # beside the inventory
    assert [p.gpu_index for p in placements] == [
        vm.vgpus[0].gpu_index for vm in plan.vms]  # each tenant's whole GPU
    jobs = {j.target.name: j.target for j in jobs_from_plan(plan, sc, inventory,
                                                             inventory_dir=tmp_path)}
    assert jobs["there"] == there


def test_an_exposed_sudo_password_file_is_refused_before_any_host_is_reached(
        tmp_path: Path) -> None:
    secret = tmp_path / "sudo.pw"
    secret.write_text("pw\n")
    secret.chmod(0o644)
    path = tmp_path / "inventory.yaml"
    path.write_text(TWO_HOSTS.replace("known_hosts: keys/known_hosts}",
                                      "known_hosts: keys/known_hosts, "
                                      "sudo_password: {file: sudo.pw}}"))
    inventory = load_inventory(path)
    sc = catalog.load("train_bm_2")
    site = Site(inventory_path=path, inventory=inventory, how="--inventory")
    with pytest.raises(InputError, match=r"ssh\.sudo_password") as refused:
        scenario_placements(sc, site)
    assert refused.value.exit_code == 2

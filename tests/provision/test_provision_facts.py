"""Fact parsers on captured guest output, and the text transforms steps apply to files."""

from __future__ import annotations

from pathlib import Path

import pytest

from vgpu.provision.facts import (
    gridd_feature_type,
    is_licensed,
    parse_dpkg_installed,
    parse_driver_versions,
    parse_gpu_list,
    parse_license_status,
    parse_os_facts,
    parse_rpm_installed,
    with_feature_type,
)
from vgpu.provision.requirements import (
    GuestRequirements,
    MeshPeer,
    MeshSpec,
    driver_version_from_name,
)
from vgpu.provision.steps import build_steps
from vgpu.provision.steps.harness import harness_version, package_tarball
from vgpu.provision.steps.mesh import config_block, replace_block, with_lines

NVIDIA_SMI_L = """\
GPU 0: GRID A100D-1-10C (UUID: GPU-4d8a1b3e-7c9f-11ee-b962-0242ac120002)
  MIG 1g.10gb     Device  0: (UUID: MIG-9e1f7c52-3f0a-5b8e-a1d2-7f3c9e2b1a40)
"""

NVIDIA_SMI_Q = """\
Driver Version                            : 535.154.05
GPU 00000000:02:00.0
    vGPU Software Licensed Product
        Product Name                      : NVIDIA Virtual Compute Server
        License Status                    : Licensed (Expiry: 2027-1-1 0:0:0 GMT)
GPU 00000000:03:00.0
    vGPU Software Licensed Product
        License Status                    : Unlicensed (Restricted)
"""


def test_gpu_listing_reads_vgpu_type_and_mig_profile() -> None:
    listing = parse_gpu_list(NVIDIA_SMI_L)
    assert listing.gpus == ("GRID A100D-1-10C",)
    assert listing.vgpu_types == ("A100D-1-10C",)
    assert listing.mig_profiles == ("1g.10gb",)
    assert listing.summary() == "GRID A100D-1-10C; MIG 1g.10gb"
    assert listing.gpu_devices[0].uuid == "GPU-4d8a1b3e-7c9f-11ee-b962-0242ac120002"
    assert listing.mig_uuids() == {"1g.10gb": ["MIG-9e1f7c52-3f0a-5b8e-a1d2-7f3c9e2b1a40"]}
    # CUDA and docker address a MIG-backed vGPU by the MIG device under it
    assert listing.compute_device(0) == listing.mig_devices[0]
    assert listing.compute_device(1) is None


def test_gpu_listing_groups_mig_devices_of_a_bare_metal_host_by_profile() -> None:
    listing = parse_gpu_list(
        "GPU 0: NVIDIA A100 80GB PCIe (UUID: GPU-aaaa)\n"
        "  MIG 4g.40gb     Device  0: (UUID: MIG-1111)\n"
        "  MIG 1g.10gb     Device  1: (UUID: MIG-2222)\n"
        "  MIG 1g.10gb     Device  2: (UUID: MIG-3333)\n")
    assert listing.mig_uuids() == {"4g.40gb": ["MIG-1111"], "1g.10gb": ["MIG-2222", "MIG-3333"]}
    assert [d.parent for d in listing.mig_devices] == [0, 0, 0]
    assert listing.compute_devices() == listing.gpu_devices  # several slices: no one of them


def test_gpu_listing_of_passthrough_gpu_has_no_mig() -> None:
    listing = parse_gpu_list("GPU 0: NVIDIA A100 80GB PCIe (UUID: GPU-1234)\n")
    assert listing.vgpu_types == ("A100 80GB PCIe",)
    assert listing.mig_profiles == ()


def test_license_status_needs_every_gpu_licensed() -> None:
    statuses = parse_license_status(NVIDIA_SMI_Q)
    assert statuses == ["Licensed (Expiry: 2027-1-1 0:0:0 GMT)", "Unlicensed (Restricted)"]
    assert not is_licensed(statuses)
    assert is_licensed(statuses[:1])
    assert not is_licensed([])


def test_os_facts_line() -> None:
    facts = parse_os_facts("ubuntu|22.04|5.15.0-91-generic|32|65842312|/usr/bin/apt-get|"
                           "/home/vgpu|/|amd64\n")
    assert (facts.distro, facts.version, facts.cpus) == ("ubuntu", "22.04", 32)
    assert (facts.package_manager, facts.arch) == ("apt-get", "amd64")
    assert round(facts.memory_gib, 1) == 62.8
    with pytest.raises(ValueError, match="unexpected OS facts"):
        parse_os_facts("garbage")


def test_package_queries() -> None:
    dpkg = ("curl\tinstall ok installed\ncmake\tdeinstall ok config-files\n"
            "docker.io:amd64\tinstall ok installed\n")
    assert parse_dpkg_installed(dpkg) == {"curl", "docker.io"}
    rpm = "gcc-11.3.1-4.el9.x86_64\npackage cmake is not installed\n"
    assert parse_rpm_installed(rpm, ("gcc", "cmake")) == {"gcc"}


def test_driver_versions_and_names() -> None:
    assert parse_driver_versions("535.154.05\n535.154.05\n") == {"535.154.05"}
    assert driver_version_from_name("/x/NVIDIA-Linux-x86_64-535.154.05-grid.run") == \
        "535.154.05"
    assert driver_version_from_name("https://h/p/NVIDIA-Linux-x86_64-550.54-grid.run") == \
        "550.54"
    assert driver_version_from_name("driver.run") is None


def test_feature_type_is_set_and_other_lines_kept() -> None:
    template = "# gridd.conf\nServerPort=7070\nFeatureType=0\nEnableUI=FALSE\n"
    updated = with_feature_type(template, 4)
    assert gridd_feature_type(updated) == 4
    assert "ServerPort=7070\n" in updated and "EnableUI=FALSE\n" in updated
    assert updated.count("FeatureType") == 1
    assert with_feature_type(updated, 4) == updated
    assert with_feature_type("FeatureType=4\nX=1\n", 1) == "FeatureType=1\nX=1\n"
    assert with_feature_type("FeatureType=0\n", 4) == "FeatureType=4\n"
    assert gridd_feature_type(with_feature_type("", 1)) == 1
    assert gridd_feature_type("# FeatureType=4 in a comment\n") is None


def test_mesh_files_are_updated_in_place_and_idempotently() -> None:
    peer = MeshPeer("vm-2", "10.0.0.2", 22, "vgpu", ("10.0.0.2 ssh-ed25519 AAAA",))
    mesh = MeshSpec("8", "PRIVATE", "ssh-ed25519 BBBB vgpu-scenario-8", (peer,))
    block = config_block(mesh, "/home/vgpu/.ssh/id_vgpu_8")
    assert "Host vm-2\n    HostName 10.0.0.2\n" in block
    mine = "Host other\n    User me\n"
    once = replace_block(mine, block, "8")
    assert once.startswith(mine) and once.endswith(block)
    assert replace_block(once, block, "8") == once
    changed = replace_block(once, block.replace("10.0.0.2", "10.0.0.9"), "8")
    assert "10.0.0.9" in changed and "10.0.0.2" not in changed and changed.startswith(mine)
    keys = with_lines("ssh-rsa OLD\n", ["ssh-ed25519 BBBB"])
    assert keys == "ssh-rsa OLD\nssh-ed25519 BBBB\n"
    assert with_lines(keys, ["ssh-ed25519 BBBB"]) == keys


def test_steps_follow_plan_names_with_os_facts_first() -> None:
    steps = build_steps(GuestRequirements(steps=("verify-gpu", "base-packages")))
    assert [s.name for s in steps] == ["os-facts", "verify-gpu", "base-packages"]
    with pytest.raises(ValueError, match="unknown guest step"):
        build_steps(GuestRequirements(steps=("install-everything",)))


def test_harness_version_follows_package_content(tmp_path: Path) -> None:
    (tmp_path / "__init__.py").write_text("x = 1\n")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "junk.pyc").write_bytes(b"\0")
    first = harness_version(tmp_path)
    assert first == harness_version(tmp_path)
    assert package_tarball(tmp_path) == package_tarball(tmp_path)
    (tmp_path / "__pycache__" / "other.pyc").write_bytes(b"\1")
    assert harness_version(tmp_path) == first  # caches do not count
    (tmp_path / "__init__.py").write_text("x = 2\n")
    assert harness_version(tmp_path) != first

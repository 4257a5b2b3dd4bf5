"""Each fact binds its command to its parser: the steps run ``fact.command`` and read the
answer with ``fact.process``, so the two cannot drift apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.provision.scripted import ScriptedTransport
from vgpu import stepnames
from vgpu.provision.facts import (
    DRIVER_VERSIONS,
    GPU_LIST,
    LICENSE_STATUS,
    OS_FACTS,
    OsFacts,
    dpkg_installed,
    rpm_installed,
)
from vgpu.provision.requirements import GuestRequirements
from vgpu.provision.step import HostContext, StepFailed
from vgpu.provision.steps.nvidia import DriverStep, LicensingStep, VerifyGpuStep
from vgpu.provision.steps.system import OsFactsStep, installed_packages
from vgpu.remote.targets import HostTarget

OS_LINE = "rocky|9.3|5.14.0-362.el9.x86_64|8|16318412|/usr/bin/dnf|/home/vgpu|/|x86_64\n"
SMI_L = ("GPU 0: GRID A100D-2-20C (UUID: GPU-11112222-3333-4444-5555-666677778888)\n"
         "  MIG 2g.20gb     Device  0: (UUID: MIG-aaaabbbb-cccc-5ddd-8eee-ffff00001111)\n")
SMI_Q = ("    vGPU Software Licensed Product\n"
         "        License Status                    : Licensed (Expiry: 2027-1-1 0:0:0 GMT)\n")


def context(transport: ScriptedTransport, **requirements: object) -> HostContext:
    values: dict[str, object] = {"steps": (), **requirements}
    return HostContext(HostTarget("vm-1", "10.0.0.5", "vgpu"), transport,
                       GuestRequirements(**values))  # type: ignore[arg-type]


def rhel() -> OsFacts:
    return OS_FACTS.process(OS_LINE)


def test_fixed_facts_name_their_command() -> None:
    assert GPU_LIST.command == "nvidia-smi -L"
    assert LICENSE_STATUS.command == "nvidia-smi -q"
    assert DRIVER_VERSIONS.command == "nvidia-smi --query-gpu=driver_version --format=csv,noheader"
    assert OS_FACTS.command.startswith(". /etc/os-release")


def test_fixed_facts_process_captured_output() -> None:
    assert (rhel().distro, rhel().package_manager, rhel().arch) == ("rocky", "dnf", "x86_64")
    listing = GPU_LIST.process(SMI_L)
    assert (listing.vgpu_types, listing.mig_profiles) == (("A100D-2-20C",), ("2g.20gb",))
    assert LICENSE_STATUS.process(SMI_Q) == ["Licensed (Expiry: 2027-1-1 0:0:0 GMT)"]
    assert DRIVER_VERSIONS.process("550.54.15\n550.54.15\n\n") == {"550.54.15"}


def test_package_facts_quote_their_names_and_read_their_answers() -> None:
    dpkg = dpkg_installed(("docker.io", "a b"))
    assert dpkg.command == "dpkg-query -W -f='${Package}\\t${Status}\\n' docker.io 'a b'"
    assert dpkg.process("docker.io:amd64\tinstall ok installed\n") == {"docker.io"}
    rpm = rpm_installed(("gcc", "cmake"))
    assert rpm.command == "rpm -q gcc cmake"
    assert rpm.process("gcc-11.3.1-4.el9.x86_64\npackage cmake is not installed\n") == {"gcc"}
    assert rpm_installed(("cmake",)).process("") == {"cmake"}


def test_os_facts_step_runs_the_fact_command() -> None:
    transport = ScriptedTransport({". /etc/os-release": [(0, OS_LINE, "")]})
    ctx = context(transport)
    checked = OsFactsStep().check(ctx)
    assert transport.ran(OS_FACTS.command) and ctx.os == rhel()
    assert checked.detail.startswith("rocky 9.3, kernel 5.14.0-362.el9.x86_64, 8 CPUs")


def test_rpm_answers_are_read_from_stdout_and_stderr() -> None:
    transport = ScriptedTransport({"rpm -q": [(1, "make-4.3-7.el9.x86_64\n",
                                              "package cmake is not installed\n")]})
    ctx = context(transport)
    ctx.os = rhel()
    found = installed_packages(ctx, OsFactsStep(), ("make", "cmake"))
    assert found == {"make"}
    assert transport.commands == [rpm_installed(("make", "cmake")).command]


def test_nvidia_steps_read_their_facts(tmp_path: Path) -> None:
    token = tmp_path / "client.tok"
    token.write_bytes(b"token")
    transport = ScriptedTransport({"--query-gpu=driver_version": [(0, "550.54.15\n", "")],
                                   "nvidia-smi -L": [(0, SMI_L, "")],
                                   "nvidia-smi -q": [(0, SMI_Q, "")]})
    ctx = context(transport, driver_version="550.54.15", licence_token_file=token,
                  expected_vgpu_types=("A100D-2-20C",), expected_mig_profiles=("2g.20gb",))
    assert DriverStep().check(ctx).detail == "driver 550.54.15"
    assert VerifyGpuStep().check(ctx).detail == "GRID A100D-2-20C; MIG 2g.20gb"
    assert LicensingStep()._licence(ctx) == ["Licensed (Expiry: 2027-1-1 0:0:0 GMT)"]
    for fact in (DRIVER_VERSIONS, GPU_LIST, LICENSE_STATUS):
        assert transport.ran(fact.command) == [fact.command]


def test_a_failed_gpu_listing_names_the_command_and_the_driver_step() -> None:
    transport = ScriptedTransport({"nvidia-smi -L": [(9, "NVIDIA-SMI has failed", "")]})
    with pytest.raises(StepFailed) as failed:
        VerifyGpuStep().check(context(transport))
    assert f"{GPU_LIST.command} failed" in str(failed.value)
    assert f"step {stepnames.NVIDIA_DRIVER}" in str(failed.value)

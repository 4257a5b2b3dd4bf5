"""Builds provisioning jobs for SSH lab hosts (shared by the provisioning tests)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tests.labs.sshlab import LabHost, SshLab, fake_driver_installer
from vgpu.provision.fanout import Job
from vgpu.provision.requirements import GuestRequirements, HarnessSpec
from vgpu.provision.steps.harness import harness_version
from vgpu.remote.targets import HostTarget
from vgpu.remote.transport import SudoSettings

ROOT = Path(__file__).resolve().parents[2]
SUDO_ENV = "VGPU_TEST_SUDO_PASSWORD"
SUDO_PASSWORD = "lab-sudo-Pw-8731"
TOKEN_TEXT = "eyJhbGciOiJSUzI1NiJ9.lab-licence-token-0451.c2lnbmF0dXJl"
GPG_KEY_URL = "https://nvidia.github.io/libnvidia-container/gpgkey"
ALL_STEPS = ("os-facts", "base-packages", "container-runtime:docker", "nvidia-driver",
             "nvidia-container-toolkit", "vgpu-licensing", "node-harness", "verify-gpu")


def target(host: LabHost, *, with_sudo: bool = False, **changes: object) -> HostTarget:
    base = HostTarget(
        name=host.name, address=host.address, port=host.port, user=host.user,
        key_file=host.key_path, known_hosts=host.known_hosts_path,
        sudo=SudoSettings(password_env=SUDO_ENV) if with_sudo else SudoSettings(),
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def guest_files(directory: Path) -> tuple[Path, Path]:
    """A simulated driver installer and a licence token file."""
    directory.mkdir(parents=True, exist_ok=True)
    token = directory / "client_configuration_token.tok"
    token.write_text(TOKEN_TEXT + "\n")
    return fake_driver_installer(directory), token


def harness() -> HarnessSpec:
    source = ROOT / "loadgen"
    return HarnessSpec(source_dir=source, version=harness_version(source))


def requirements(directory: Path, steps: tuple[str, ...] = ALL_STEPS,
                 **changes: object) -> GuestRequirements:
    driver, token = guest_files(directory)
    base = GuestRequirements(
        steps=steps, driver_source=str(driver), licence_token_file=token,
        licence_timeout_s=5, expected_vgpu_types=("A100D-1-10C",),
        expected_mig_profiles=("1g.10gb",), harness=harness(),
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def serve_toolkit_key(lab: SshLab) -> None:
    for host in lab.hosts:
        host.serve_url(GPG_KEY_URL, b"-----BEGIN PGP PUBLIC KEY BLOCK-----\nlab\n")


def jobs(lab: SshLab, req: GuestRequirements, *, sudo: bool = False) -> list[Job]:
    return [Job(target(h, with_sudo=sudo), req) for h in lab.hosts]


def leftover_temp_files(lab: SshLab) -> list[Path]:
    return [p for h in lab.hosts for p in h.home.rglob("*.vgpu-tmp*")]

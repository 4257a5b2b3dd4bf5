"""Builds provisioning jobs for SSH lab hosts (shared by the provisioning tests)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tests.labs.connect import FAST
from tests.labs.sshlab import LabHost, SshLab, fake_driver_installer
from vgpu.model.inventory import Drivers, Inventory
from vgpu.model.load import load_inventory, load_scenario
from vgpu.planner import build_plan
from vgpu.provision.adapter import HarnessOptions, jobs_from_plan
from vgpu.provision.fanout import Job, provision_all
from vgpu.provision.report import RunReport
from vgpu.provision.requirements import GuestRequirements, HarnessSpec
from vgpu.provision.steps.harness import harness_version
from vgpu.remote.targets import ConnectOptions, HostTarget
from vgpu.remote.transport import SudoSettings

ROOT = Path(__file__).resolve().parents[2]
SUDO_ENV = "VGPU_TEST_SUDO_PASSWORD"
SUDO_PASSWORD = "lab-sudo-Pw-8731"
TOKEN_TEXT = "eyJhbGciOiJSUzI1NiJ9.lab-licence-token-0451.c2lnbmF0dXJl"
GPG_KEY_URL = "https://nvidia.github.io/libnvidia-container/gpgkey"
# /proc/version of Ubuntu 22.04's HWE kernel (built with gcc 12) and GA kernel (gcc 11)
HWE_KERNEL = ("Linux version 6.5.0-41-generic (buildd@lcy02-amd64-120) (x86_64-linux-gnu-gcc-12 "
              "(Ubuntu 12.3.0-1ubuntu1~22.04) 12.3.0, GNU ld (GNU Binutils for Ubuntu) 2.38) "
              "#41~22.04.2-Ubuntu SMP PREEMPT_DYNAMIC Fri Jun  7 14:49:33 UTC 2")
GA_KERNEL = ("Linux version 5.15.0-105-generic (buildd@lcy02-amd64-054) (gcc (Ubuntu "
             "11.4.0-1ubuntu1~22.04) 11.4.0, GNU ld (GNU Binutils for Ubuntu) 2.38) "
             "#115-Ubuntu SMP Mon Apr 15 09:52:04 UTC 2024")
NO_DEPS = HarnessOptions(install_requirements=False)
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


def provision_jobs(job_list: list[Job], tmp: Path, name: str, *,
                   options: ConnectOptions = FAST, concurrency: int = 1,
                   scenario: str = "adhoc", dry_run: bool = False,
                   log_folder: str = "") -> RunReport:
    """Provisions ``job_list``: its logs in ``tmp/log_folder/name``, its state in
    ``tmp/state`` (shared by the runs of one test, as a second run on a real lab finds
    the first one's)."""
    return provision_all(job_list, options=options, log_dir=tmp / log_folder / name,
                         state_dir=tmp / "state", scenario=scenario, concurrency=concurrency,
                         dry_run=dry_run)


def provision_lab(lab: SshLab, tmp: Path, name: str, *, steps: tuple[str, ...] = ALL_STEPS,
                  dry_run: bool = False, **changes: object) -> RunReport:
    """Provisions every host of ``lab`` with ``steps`` of the lab's requirements (with
    ``changes``), one host at a time."""
    req = requirements(tmp / "files", steps=steps, **changes)
    return provision_jobs(jobs(lab, req), tmp, name, dry_run=dry_run)


def leftover_temp_files(lab: SshLab) -> list[Path]:
    return [p for h in lab.hosts for p in h.home.rglob("*.vgpu-tmp*")]


def sim_inventory(**drivers: str) -> Inventory:
    """The simulated lab's inventory with these ``drivers`` settings."""
    sim = load_inventory(ROOT / "inventory" / "sim.yaml")
    return sim.model_copy(update={"drivers": Drivers(**drivers)})  # type: ignore[arg-type]


def driver_files(files: Path) -> dict[str, str]:
    """A simulated grid and data-center driver installer in ``files``, as drivers
    settings."""
    files.mkdir(parents=True, exist_ok=True)
    return {"guest_driver": str(fake_driver_installer(files, "550.54.15")),
            "datacenter_driver": str(fake_driver_installer(files, "550.54.15", "datacenter"))}


def scenario_jobs(name: str, inv: Inventory, files: Path) -> list[Job]:
    """The provisioning jobs of catalogue scenario ``name`` planned on ``inv``."""
    scenario = load_scenario(ROOT / "scenarios" / f"{name}.yaml")
    return jobs_from_plan(build_plan(scenario, inv), scenario, inv, inventory_dir=files,
                          harness=NO_DEPS)

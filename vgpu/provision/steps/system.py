"""OS facts, base packages and the container runtime."""

from __future__ import annotations

from vgpu import stepnames
from vgpu.provision.facts import OS_FACTS, OsFacts, dpkg_installed, rpm_installed
from vgpu.provision.requirements import GuestRequirements
from vgpu.provision.step import Check, HostContext, Step, guest_step
from vgpu.remote.transport import quote

APT_ENV = "DEBIAN_FRONTEND=noninteractive"
APT_UPDATED = "apt-index-refreshed"
# Debian names in the scenario, mapped for RPM distributions.
RPM_NAMES = {"build-essential": ("gcc", "gcc-c++", "make"), "docker.io": ("docker-ce",)}


@guest_step
class OsFactsStep(Step):
    name = stepnames.OS_FACTS
    read_only = True

    def check(self, ctx: HostContext) -> Check:
        ctx.os = read_os_facts(ctx, self)
        return Check(True, ctx.os.summary())


def read_os_facts(ctx: HostContext, step: Step) -> OsFacts:
    return OS_FACTS.process(step.must(ctx, OS_FACTS.command).stdout)


def package_manager(ctx: HostContext, step: Step) -> str:
    if ctx.os is None:
        ctx.os = read_os_facts(ctx, step)
    manager = ctx.os.package_manager
    if manager not in ("apt-get", "dnf", "yum"):
        raise step.fail(ctx, f"no supported package manager on {ctx.os.distro} "
                        "(apt-get, dnf or yum)", "use an Ubuntu/Debian or RHEL-family guest")
    return manager


def native_names(manager: str, packages: tuple[str, ...]) -> tuple[str, ...]:
    if manager == "apt-get":
        return packages
    return tuple(name for pkg in packages for name in RPM_NAMES.get(pkg, (pkg,)))


def installed_packages(ctx: HostContext, step: Step, packages: tuple[str, ...]) -> set[str]:
    manager = package_manager(ctx, step)
    names = native_names(manager, packages)
    if manager == "apt-get":
        dpkg = dpkg_installed(names)
        return dpkg.process(ctx.run(dpkg.command).stdout)
    rpm = rpm_installed(names)
    result = ctx.run(rpm.command)
    return rpm.process(result.stdout + result.stderr)


def install_packages(ctx: HostContext, step: Step, packages: tuple[str, ...]) -> None:
    manager = package_manager(ctx, step)
    names = " ".join(quote(p) for p in native_names(manager, packages))
    fix = "check the guest's package sources (apt/dnf repositories, proxy) and disk space"
    if manager == "apt-get":
        # One index refresh per host and run (a new apt source clears the flag).
        update = "" if ctx.facts.get(APT_UPDATED) else f"{APT_ENV} apt-get update -q && "
        step.must(ctx, f"{update}{APT_ENV} apt-get install -y -q --no-install-recommends "
                  f"{names}", sudo=True, fix=fix)
        ctx.facts[APT_UPDATED] = "yes"
    else:
        step.must(ctx, f"{manager} install -y {names}", sudo=True, fix=fix)


class PackagesStep(Step):
    """Packages through the guest's package manager (idempotent: installs only missing)."""

    def __init__(self, packages: tuple[str, ...]) -> None:
        self.packages = packages
        self.last_missing: list[str] = []  # from the latest check; one step object per host

    def missing(self, ctx: HostContext) -> list[str]:
        manager = package_manager(ctx, self)
        wanted = native_names(manager, self.packages)
        have = installed_packages(ctx, self, self.packages)
        self.last_missing = [p for p in wanted if p not in have]
        return self.last_missing

    def check(self, ctx: HostContext) -> Check:
        missing = self.missing(ctx)
        if missing:
            return Check(False, f"missing: {', '.join(missing)}")
        return Check(True, f"installed: {', '.join(self.packages)}")

    def apply(self, ctx: HostContext) -> None:
        install_packages(ctx, self, tuple(self.last_missing))


@guest_step
class BasePackagesStep(PackagesStep):
    name = stepnames.BASE_PACKAGES

    @classmethod
    def for_guest(cls, requirements: GuestRequirements) -> Step:
        return cls(requirements.base_packages)


@guest_step
class DockerStep(PackagesStep):
    name = stepnames.DOCKER

    @classmethod
    def for_guest(cls, requirements: GuestRequirements) -> Step:
        return cls((requirements.docker_package,))

    def check(self, ctx: HostContext) -> Check:
        self.last_missing = []
        packages = super().check(ctx)
        if not packages.done:
            return packages
        active = ctx.run("systemctl is-active docker")
        if active.stdout.strip() != "active":
            return Check(False, "docker is installed but the service is not active")
        return Check(True, "docker installed and active")

    def apply(self, ctx: HostContext) -> None:
        if self.last_missing:
            install_packages(ctx, self, tuple(self.last_missing))
        self.must(ctx, "systemctl enable --now docker", sudo=True,
                  fix="look at `journalctl -u docker` on the guest")

    def verify(self, ctx: HostContext) -> str:
        detail = super().verify(ctx)
        self.must(ctx, "docker info", sudo=True, fix="look at `journalctl -u docker`")
        return detail


@guest_step
class ApptainerStep(PackagesStep):
    name = stepnames.APPTAINER

    @classmethod
    def for_guest(cls, requirements: GuestRequirements) -> Step:
        return cls((requirements.apptainer_package,))

    def verify(self, ctx: HostContext) -> str:
        detail = super().verify(ctx)
        version = self.must(ctx, "apptainer --version")
        return f"{detail}; {version.stdout.strip()}"

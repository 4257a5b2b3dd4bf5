"""OS facts, base packages and the container runtime."""

from __future__ import annotations

from dataclasses import dataclass

from vgpu import stepnames
from vgpu.provision.facts import OS_FACTS, OsFacts, dpkg_installed, rpm_installed
from vgpu.provision.requirements import GuestRequirements
from vgpu.provision.step import Check, HostContext, Step, guest_step
from vgpu.provision.steps.dockercmd import docker_fix, shell
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


DOCKER_GROUP = "docker"
# The login user, the groups of this SSH session, and the user's groups in the group
# database: a group joined after login is in the database but not in the session.
GROUPS_COMMAND = 'id -un; id -nG; id -nG "$(id -un)"'


@dataclass(frozen=True)
class DockerAccess:
    user: str
    in_session: bool  # this login's processes carry the docker group
    member: bool  # the group database lists the user (later logins get the group)

    @property
    def granted(self) -> bool:
        return self.user == "root" or self.in_session


def parse_docker_access(text: str) -> DockerAccess:
    lines = [*text.splitlines(), "", "", ""]
    user, session, database = (line.split() for line in lines[:3])
    return DockerAccess(user=user[0] if user else "?", in_session=DOCKER_GROUP in session,
                        member=DOCKER_GROUP in database)


@guest_step
class DockerStep(PackagesStep):
    """Docker installed and running, and the login user in the ``docker`` group: the
    daemon's socket admits only root and that group, and every later docker command runs as
    the login user."""

    name = stepnames.DOCKER

    def __init__(self, packages: tuple[str, ...]) -> None:
        super().__init__(packages)
        self.last_access: DockerAccess | None = None

    @classmethod
    def for_guest(cls, requirements: GuestRequirements) -> Step:
        return cls((requirements.docker_package,))

    def _access(self, ctx: HostContext) -> DockerAccess:
        self.last_access = parse_docker_access(self.must(ctx, GROUPS_COMMAND).stdout)
        return self.last_access

    def check(self, ctx: HostContext) -> Check:
        self.last_missing = []
        self.last_access = None
        packages = super().check(ctx)
        if not packages.done:
            return packages
        active = ctx.run("systemctl is-active docker")
        if active.stdout.strip() != "active":
            return Check(False, "docker is installed but the service is not active")
        access = self._access(ctx)
        if not access.granted:
            if access.member:
                return Check(False, f"{access.user} is in the docker group, but this login "
                             "predates it")
            return Check(False, f"{access.user} is not in the docker group")
        return Check(True, f"docker installed and active; {access.user} may use it")

    def apply(self, ctx: HostContext) -> None:
        if self.last_missing:
            install_packages(ctx, self, tuple(self.last_missing))
        if ctx.run("systemctl is-active docker").stdout.strip() != "active":
            self.must(ctx, "systemctl enable --now docker", sudo=True,
                      fix="look at `journalctl -u docker` on the guest")
        access = self.last_access or self._access(ctx)
        if access.granted:
            return
        if not access.member:
            self.must(ctx, f"usermod -aG {DOCKER_GROUP} {quote(access.user)}", sudo=True)
        # Group membership is read at login: only a new SSH connection carries the group.
        ctx.transport.log.line(f"[{self.name}] reconnecting so that the docker group applies")
        ctx.transport.reconnect()

    def verify(self, ctx: HostContext) -> str:
        result = self.check(ctx)
        if not result.done:
            access = self.last_access
            if access is not None and access.member and not access.granted:
                raise self.fail(ctx, f"{access.user} joined the docker group, but a new login "
                                "still lacks it",
                                f"log in to {ctx.name} again (or reboot it) and re-run")
            raise self.fail(ctx, f"still not in the desired state after applying: "
                            f"{result.detail}")
        info = ctx.run(shell(ctx.requirements.docker.argv("info")))
        if not info.ok:
            user = self.last_access.user if self.last_access else "the login user"
            raise self.fail(ctx, f"`docker info` as {user} exited {info.exit_code}: "
                            f"{info.tail()}",
                            docker_fix(info, "look at `journalctl -u docker` on the guest"))
        return result.detail


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

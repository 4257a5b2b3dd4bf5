"""The NVIDIA guest stack: driver, container toolkit, vGPU licensing, and the final check
that ``nvidia-smi -L`` shows exactly the vGPU / MIG profile the plan asked for."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path

from vgpu import stepnames
from vgpu.provision.facts import (
    DRIVER_VERSIONS,
    GPU_LIST,
    LICENSE_STATUS,
    gridd_feature_type,
    is_licensed,
    with_feature_type,
)
from vgpu.provision.reboot import reboot_and_reconnect
from vgpu.provision.requirements import GuestRequirements, is_url
from vgpu.provision.running_driver import judge_running_driver
from vgpu.provision.step import Check, HostContext, Step, guest_step
from vgpu.provision.steps.driver_release import release_driver
from vgpu.provision.steps.kernel import (
    NOUVEAU_BLACKLIST,
    KernelFacts,
    blacklist_nouveau,
    install_build_tools,
    read_kernel_facts,
    refuse_secure_boot,
)
from vgpu.provision.steps.system import (
    APT_UPDATED,
    install_packages,
    installed_packages,
    package_manager,
    read_os_facts,
)
from vgpu.remote.transport import quote

DRIVER_DIR = ".vgpu/driver"
GRIDD_CONF = "/etc/nvidia/gridd.conf"
GRIDD_TEMPLATE = "/etc/nvidia/gridd.conf.template"
TOKEN_DIR = "/etc/nvidia/ClientConfigToken"
TOKEN_NAME = "client_configuration_token_vgpu.tok"
DAEMON_JSON = "/etc/docker/daemon.json"


@dataclass(frozen=True)
class DriverFile:
    """What the scenario's guest.driver installs, and where the inventory names its file."""

    field: str
    title: str
    file_name: str
    where: str


DRIVER_KINDS = {
    "vgpu-guest": DriverFile(
        "drivers.guest_driver", "vGPU guest driver", "NVIDIA-Linux-x86_64-<version>-grid.run",
        "the vGPU guest driver from the NVIDIA licensing portal"),
    "datacenter": DriverFile(
        "drivers.datacenter_driver", "data-center driver", "NVIDIA-Linux-x86_64-<version>.run",
        "the data-center driver from NVIDIA's driver downloads (passthrough VMs and bare-metal "
        "hosts run it without vGPU licensing)"),
}


def is_vgpu_guest_driver(source: str) -> bool:
    return source.rsplit("/", 1)[-1].endswith("-grid.run")


def sha256_of(ctx: HostContext, path: str, sudo: bool = False) -> str | None:
    result = ctx.run(f"sha256sum {quote(path)} 2>/dev/null", sudo=sudo)
    return result.stdout.split()[0] if result.ok and result.stdout.strip() else None


@guest_step
class DriverStep(Step):
    name = stepnames.NVIDIA_DRIVER

    def __init__(self) -> None:
        self.running: set[str] | None = None  # the versions the latest check found running
        self.mismatch = False  # the latest check: nvidia.ko is another version than nvidia-smi

    def preflight(self, req: GuestRequirements) -> list[tuple[str, str, str]]:
        kind = DRIVER_KINDS[req.driver_kind]
        if not req.driver_source:
            return [(kind.field, f"no NVIDIA {kind.title} (.run file or URL) given",
                     f"set {kind.field} in the inventory to {kind.where}")]
        problems = []
        if not is_url(req.driver_source) and not Path(req.driver_source).is_file():
            problems.append((kind.field, f"driver file {req.driver_source} does not exist",
                             f"download {kind.file_name} and give its path (or an http(s) "
                             "URL)"))
        if not req.expected_driver_version:
            problems.append((kind.field,
                             f"cannot tell the driver version from {req.driver_source}",
                             "keep NVIDIA's file name (it contains the version)"))
        if req.driver_kind == "datacenter" and is_vgpu_guest_driver(req.driver_source):
            problems.append((kind.field, f"{req.driver_source} is the vGPU guest driver "
                             "(-grid.run), but the scenario's guest.driver is datacenter",
                             f"set {kind.field} to {kind.file_name}, or guest.driver: "
                             "vgpu-guest in the scenario (the vGPU guest driver, licensed "
                             "through nvidia-gridd)"))
        return problems

    def _versions(self, ctx: HostContext) -> set[str] | None:
        result = ctx.run(DRIVER_VERSIONS.command)
        self.mismatch = "version mismatch" in result.stdout + result.stderr
        return DRIVER_VERSIONS.process(result.stdout) if result.ok else None

    def check(self, ctx: HostContext) -> Check:
        want = ctx.requirements.expected_driver_version
        versions = self.running = self._versions(ctx)
        if versions is None:
            state = "the loaded nvidia.ko is another version than the installed driver" \
                if self.mismatch else "no working NVIDIA driver"
            return Check(False, f"{state}; want {want}")
        if versions != {want}:
            return Check(False, f"driver {', '.join(sorted(versions))}; want {want}")
        self._judge_against_host(ctx, want)
        return Check(True, f"driver {want}")

    def _judge_against_host(self, ctx: HostContext, running: str | None) -> None:
        """Fail when the guest's running driver does not run under its host's VIB."""
        req = ctx.requirements
        if running is None or req.host_driver_version is None:
            return
        problem = judge_running_driver(ctx.name, running, req.host_driver_version,
                                       req.compatible_guest_branches, req.host_name)
        if problem is not None:
            raise self.fail(ctx, problem.message, problem.fix)

    def apply(self, ctx: HostContext) -> None:
        kernel = self._prepare_kernel(ctx)
        if kernel.nouveau_loaded:
            reboot_and_reconnect(ctx, self, "nouveau is loaded, and the NVIDIA installer "
                                 "refuses to run beside it")
            ctx.os = read_os_facts(ctx, self)  # the new boot may run a newer kernel
            kernel = self._prepare_kernel(ctx)
            if kernel.nouveau_loaded:
                raise self.fail(ctx, "nouveau is still loaded after a reboot with it "
                                f"blacklisted in {NOUVEAU_BLACKLIST}",
                                "look for another modprobe.d file or kernel parameter that "
                                "loads nouveau (`lsmod | grep nouveau`, /proc/cmdline)")
        remote = self._upload(ctx)
        in_place = self.running is not None or self.mismatch
        if in_place:
            release_driver(ctx, self)
        self._install(ctx, remote, kernel)
        if in_place:
            before = ", ".join(sorted(self.running or ())) or "a driver nvidia-smi cannot use"
            reboot_and_reconnect(ctx, self, f"the driver changed in place ({before} -> "
                                 f"{ctx.requirements.expected_driver_version}): every service "
                                 "and the kernel start on the new one")

    def _prepare_kernel(self, ctx: HostContext) -> KernelFacts:
        kernel = read_kernel_facts(ctx)
        refuse_secure_boot(ctx, self, kernel)
        install_build_tools(ctx, self, kernel)
        blacklist_nouveau(ctx, self, kernel)
        return kernel

    def _install(self, ctx: HostContext, remote: str, kernel: KernelFacts) -> None:
        # --dkms registers the module with DKMS, so a kernel update rebuilds it.
        compiler = kernel.compiler_env(package_manager(ctx, self))
        self.must(ctx, f"{compiler}sh {quote(remote)} --silent --dkms", sudo=True,
                  fix="read /var/log/nvidia-installer.log on the guest")

    def _upload(self, ctx: HostContext) -> str:
        """The installer on the guest (uploaded, or fetched there from its URL)."""
        source = ctx.requirements.driver_source
        assert source is not None
        remote = f"{ctx.home}/{DRIVER_DIR}/{source.rsplit('/', 1)[-1]}"
        if is_url(source):
            self.must(ctx, f"mkdir -p {ctx.home}/{DRIVER_DIR} && curl -fsSL -o "
                      f"{quote(remote)}.part {quote(source)} && mv -f {quote(remote)}.part "
                      f"{quote(remote)}", fix=f"check that the guest can fetch {source}")
        else:
            local = Path(source)
            digest = hashlib.sha256(local.read_bytes()).hexdigest()
            if sha256_of(ctx, remote) != digest:
                ctx.transport.put(local, remote, mode=0o755)
        return remote


@guest_step
class ContainerToolkitStep(Step):
    name = stepnames.CONTAINER_TOOLKIT
    package = "nvidia-container-toolkit"

    def _configured(self, ctx: HostContext) -> bool:
        daemon = ctx.run(f"cat {quote(ctx.path(DAEMON_JSON))} 2>/dev/null")
        return '"nvidia"' in daemon.stdout

    def __init__(self) -> None:
        self.installed = False  # from the latest check

    def check(self, ctx: HostContext) -> Check:
        self.installed = self.package in installed_packages(ctx, self, (self.package,))
        if not self.installed:
            return Check(False, f"{self.package} not installed")
        if not self._configured(ctx):
            return Check(False, "docker has no nvidia runtime")
        return Check(True, "installed; docker runtime nvidia configured")

    def apply(self, ctx: HostContext) -> None:
        repo = ctx.requirements.toolkit_repo
        if ctx.os is not None and ctx.os.package_manager != "apt-get":
            raise self.fail(ctx, f"toolkit repository set-up is implemented for apt only, "
                            f"not {ctx.os.package_manager}",
                            "install nvidia-container-toolkit from NVIDIA's rpm repository "
                            "by hand, then re-run")
        if not self.installed:
            keyring = quote(ctx.path(repo.keyring))
            self.must(ctx, f"test -s {keyring} || {{ mkdir -p $(dirname {keyring}) && "
                      f"curl -fsSL {quote(repo.gpg_key_url)} | gpg --batch --yes --dearmor "
                      f"-o {keyring}.vgpu-tmp && mv -f {keyring}.vgpu-tmp {keyring}; }}",
                      sudo=True, fix=f"check that the guest can fetch {repo.gpg_key_url}")
            arch = ctx.os.arch if ctx.os and ctx.os.arch else "amd64"
            line = repo.list_line.replace("$(ARCH)", arch)
            ctx.transport.put(f"{line}\n", ctx.path(repo.list_file), mode=0o644, sudo=True)
            ctx.facts.pop(APT_UPDATED, None)  # the new source needs an index refresh
            install_packages(ctx, self, (self.package,))
        self.must(ctx, f"nvidia-ctk runtime configure --runtime=docker "
                  f"--config={quote(ctx.path(DAEMON_JSON))}", sudo=True)
        self.must(ctx, "systemctl restart docker", sudo=True,
                  fix="look at `journalctl -u docker` on the guest")


@guest_step
class LicensingStep(Step):
    name = stepnames.VGPU_LICENSING

    def __init__(self) -> None:
        self.last_conf = ""  # gridd.conf as the latest check read it

    def preflight(self, req: GuestRequirements) -> list[tuple[str, str, str]]:
        token = req.licence_token_file
        if token is None:
            return [("drivers.licence_token", "no client configuration token given",
                     "download the .tok file from your NVIDIA License System instance and "
                     "set drivers.licence_token to its path")]
        if not token.is_file():
            return [("drivers.licence_token", f"token file {token} does not exist",
                     "set drivers.licence_token to the client configuration token (.tok) "
                     "file downloaded from the NVIDIA License System")]
        return []

    def _token_bytes(self, ctx: HostContext) -> bytes:
        assert ctx.requirements.licence_token_file is not None
        return ctx.requirements.licence_token_file.read_bytes()

    def _state(self, ctx: HostContext) -> tuple[str, list[str]]:
        want = ctx.requirements.feature_type
        token_path = f"{ctx.path(TOKEN_DIR)}/{TOKEN_NAME}"
        files = ctx.read_files([ctx.path(GRIDD_CONF), f"{token_path}.sha256"], sudo=True,
                               commands={f"{token_path}.sha256": f"sha256sum {quote(token_path)}"})
        conf = files[ctx.path(GRIDD_CONF)]
        problems = []
        have = gridd_feature_type(conf)
        if have != want:
            problems.append(f"gridd.conf FeatureType is {have}, want {want}")
        remote_hash = (files[f"{token_path}.sha256"].split() or [""])[0]
        if remote_hash != hashlib.sha256(self._token_bytes(ctx)).hexdigest():
            problems.append("client configuration token missing or different")
        return conf, problems

    def _licence(self, ctx: HostContext) -> list[str]:
        return LICENSE_STATUS.process(ctx.run(LICENSE_STATUS.command).stdout)

    def check(self, ctx: HostContext) -> Check:
        self.last_conf, problems = self._state(ctx)
        if problems:
            return Check(False, "; ".join(problems))
        statuses = self._licence(ctx)
        if not is_licensed(statuses):
            return Check(False, f"License Status: {', '.join(statuses) or 'not reported'}")
        return Check(True, f"FeatureType={ctx.requirements.feature_type}; "
                     f"License Status: {statuses[0]}")

    def apply(self, ctx: HostContext) -> None:
        conf = self.last_conf
        if not conf.strip():
            conf = ctx.run(f"cat {quote(ctx.path(GRIDD_TEMPLATE))} 2>/dev/null").stdout
        desired = with_feature_type(conf, ctx.requirements.feature_type)
        ctx.transport.put(desired, ctx.path(GRIDD_CONF), mode=0o644, sudo=True)
        ctx.transport.put(self._token_bytes(ctx), f"{ctx.path(TOKEN_DIR)}/{TOKEN_NAME}",
                          mode=0o744, sudo=True)
        self.must(ctx, "systemctl restart nvidia-gridd", sudo=True,
                  fix="look at `journalctl -u nvidia-gridd` on the guest")

    def verify(self, ctx: HostContext) -> str:
        deadline = time.monotonic() + ctx.requirements.licence_timeout_s
        while True:
            result = self.check(ctx)
            if result.done:
                return result.detail
            if time.monotonic() >= deadline:
                raise self.fail(ctx, f"not licensed after {ctx.requirements.licence_timeout_s:.0f}"
                                f"s: {result.detail}",
                                "check that the guest reaches the licence server named in the "
                                "token and `journalctl -u nvidia-gridd`")
            time.sleep(1.0)


@guest_step
class VerifyGpuStep(Step):
    name = stepnames.VERIFY_GPU
    read_only = True

    def check(self, ctx: HostContext) -> Check:
        req = ctx.requirements
        result = ctx.run(GPU_LIST.command)
        if not result.ok:
            raise self.fail(ctx, f"{GPU_LIST.command} failed: {result.tail()}",
                            f"install the guest driver (step {stepnames.NVIDIA_DRIVER}) first")
        listing = GPU_LIST.process(result.stdout)
        problems = []
        if req.expected_vgpu_types and sorted(listing.vgpu_types) != sorted(
                req.expected_vgpu_types):
            problems.append(f"GPUs {list(listing.vgpu_types)}, want "
                            f"{list(req.expected_vgpu_types)}")
        if sorted(listing.mig_profiles) != sorted(req.expected_mig_profiles):
            problems.append(f"MIG devices {list(listing.mig_profiles)}, want "
                            f"{list(req.expected_mig_profiles)}")
        if problems:
            raise self.fail(ctx, "; ".join(problems),
                            "the VM has the wrong vGPU profile: re-run `vgpu apply` for this "
                            "scenario, or check the host's MIG mode")
        return Check(True, listing.summary())

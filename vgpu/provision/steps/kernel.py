"""What the NVIDIA driver's kernel module needs on a stock guest before its installer can
run: Secure Boot off (an unsigned nvidia.ko does not load), the headers of the running
kernel, DKMS, the gcc the kernel was built with (HWE kernels use a newer one than the
distribution's default) and nouveau blacklisted and not loaded."""

from __future__ import annotations

import re
from dataclasses import dataclass

from vgpu.provision.step import HostContext, Step
from vgpu.provision.steps.system import (
    install_packages,
    installed_packages,
    native_names,
    package_manager,
)
from vgpu.remote.transport import quote

PROC_VERSION = "/proc/version"
NOUVEAU_MODULE = "/sys/module/nouveau"
NOUVEAU_BLACKLIST = "/etc/modprobe.d/blacklist-nouveau.conf"
NOUVEAU_BLACKLIST_TEXT = "blacklist nouveau\noptions nouveau modeset=0\n"
SECURE_BOOT_COMMAND = "mokutil --sb-state"
# "gcc-12 (Ubuntu 12.3.0-1ubuntu1~22.04) 12.3.0", "gcc (GCC) 11.4.1", "gcc version 9.4.0"
KERNEL_GCC = re.compile(r"gcc.*?\b(\d+)\.\d+\.\d+")
INITRAMFS_COMMANDS = {"apt-get": "update-initramfs -u", "dnf": "dracut --force",
                      "yum": "dracut --force"}
SECURE_BOOT_FIX = (
    "turn Secure Boot off on the VM (vSphere: VM Options > Boot Options > Secure Boot, or "
    "bootOptions.efiSecureBootEnabled = false with the VM powered off), or sign nvidia.ko "
    "with a key enrolled in the guest's MOK list, then re-run")


def kernel_gcc_major(proc_version: str) -> int | None:
    """The major version of the gcc that built the running kernel, from /proc/version."""
    match = KERNEL_GCC.search(proc_version)
    return int(match.group(1)) if match else None


def secure_boot_enabled(mokutil_output: str) -> bool:
    return "SecureBoot enabled" in mokutil_output


@dataclass(frozen=True)
class KernelFacts:
    release: str  # uname -r
    gcc_major: int | None  # None where /proc/version names no gcc
    nouveau_loaded: bool
    nouveau_blacklisted: bool
    secure_boot: bool

    def build_packages(self, manager: str) -> tuple[str, ...]:
        """Packages the driver's DKMS build needs, by the guest's package manager."""
        if manager != "apt-get":
            return ("build-essential", "dkms", f"kernel-devel-{self.release}")
        compiler = (f"gcc-{self.gcc_major}",) if self.gcc_major else ()
        return ("build-essential", "dkms", f"linux-headers-{self.release}", *compiler)

    def compiler_env(self, manager: str) -> str:
        """``CC=gcc-N `` for the installer where the kernel names its gcc (apt guests)."""
        return f"CC=gcc-{self.gcc_major} " if manager == "apt-get" and self.gcc_major else ""


def read_kernel_facts(ctx: HostContext) -> KernelFacts:
    release = ctx.run("uname -r").stdout.strip()
    nouveau, secure_boot = "nouveau-loaded", "secure-boot"
    files = ctx.read_files(
        [ctx.path(PROC_VERSION), ctx.path(NOUVEAU_BLACKLIST), nouveau, secure_boot],
        commands={nouveau: f"test -d {quote(ctx.path(NOUVEAU_MODULE))} && echo loaded",
                  secure_boot: SECURE_BOOT_COMMAND})
    return KernelFacts(
        release=release, gcc_major=kernel_gcc_major(files[ctx.path(PROC_VERSION)]),
        nouveau_loaded=files[nouveau].strip() == "loaded",
        nouveau_blacklisted=files[ctx.path(NOUVEAU_BLACKLIST)] == NOUVEAU_BLACKLIST_TEXT,
        secure_boot=secure_boot_enabled(files[secure_boot]))


def refuse_secure_boot(ctx: HostContext, step: Step, kernel: KernelFacts) -> None:
    if kernel.secure_boot:
        raise step.fail(ctx, f"`{SECURE_BOOT_COMMAND}` says SecureBoot enabled: the driver's "
                        "unsigned nvidia.ko would not load", SECURE_BOOT_FIX)


def install_build_tools(ctx: HostContext, step: Step, kernel: KernelFacts) -> None:
    manager = package_manager(ctx, step)
    wanted = kernel.build_packages(manager)
    have = installed_packages(ctx, step, wanted)
    missing = tuple(p for p in native_names(manager, wanted) if p not in have)
    if missing:
        install_packages(ctx, step, missing)


def blacklist_nouveau(ctx: HostContext, step: Step, kernel: KernelFacts) -> None:
    """Write the blacklist and rebuild the initramfs (nouveau loads from it at boot)."""
    if kernel.nouveau_blacklisted:
        return
    ctx.transport.put(NOUVEAU_BLACKLIST_TEXT, ctx.path(NOUVEAU_BLACKLIST), mode=0o644,
                      sudo=True)
    command = INITRAMFS_COMMANDS[package_manager(ctx, step)]
    step.must(ctx, command, sudo=True, timeout=600,
              fix=f"run `sudo {command}` on the guest and read its output")

"""ESXi advanced options a scenario asks of its hosts (vm_settings.ats host settings), read,
set and checked through each host's OptionManager (``configManager.advancedOption``:
QueryOptions / UpdateOptions). ``vgpu apply`` sets what differs on the hosts the plan uses;
``vgpu preflight`` reads them and says, per host, the esxcli command for what it cannot
set."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyVmomi import vim, vmodl

from vgpu.errors import RemoteError
from vgpu.vsphere.read.facts import HostFacts


@dataclass(frozen=True)
class OptionRead:
    """One advanced option as the host reports it; ``current`` None when the host does not
    know the key (or cannot be asked: ``why``)."""

    key: str
    current: Any = None
    why: str | None = None

    @property
    def text(self) -> str:
        return "(unknown on this host)" if self.current is None else str(self.current)


@dataclass(frozen=True)
class HostOptionChange:
    """An advanced option whose value on ``host`` is not the wanted one."""

    host: str
    key: str
    current: OptionRead
    wanted: str
    option_manager: Any = None


def esxcli_command(key: str, value: str) -> str:
    """What an operator runs on the host for this option (PCI.Foo -> /PCI/Foo)."""
    flag = "-i" if value.lstrip("-").isdigit() else "-s"
    return f"esxcli system settings advanced set -o /{key.replace('.', '/')} {flag} {value}"


def read_option(facts: HostFacts, key: str) -> OptionRead:
    if facts.option_manager is None:
        return OptionRead(key, why="the host has no advanced option manager")
    try:
        values = facts.option_manager.QueryOptions(name=key) or []
    except vim.fault.InvalidName:
        return OptionRead(key, why=f"the host does not know the option {key}")
    except vmodl.MethodFault as exc:
        return OptionRead(key, why=f"QueryOptions failed: {exc.msg or type(exc).__name__}")
    exact = next((v for v in values if v.key == key), None)
    if exact is None:
        return OptionRead(key, why=f"the host does not know the option {key}")
    return OptionRead(key, current=exact.value)


# ESXi advanced options that change how GPU VMs run, recorded with every host's facts so a
# change between two runs shows as drift (the scenario's own, the ATS ones, are added):
# the host power policy (CPU frequency under the benchmark's CPU-side work), interrupt
# remapping (passthrough devices' interrupts) and the PCIe ACS check (peer-to-peer between
# passthrough GPUs).
GPU_VM_OPTIONS = ("Power.CpuPolicy", "VMkernel.Boot.iovDisableIR",
                  "VMkernel.Boot.disableACSCheck")


def read_options(facts: HostFacts, keys: list[str]) -> dict[str, str | None]:
    """Each key's value on the host as text; None where the host does not know it."""
    out: dict[str, str | None] = {}
    for key in keys:
        read = read_option(facts, key)
        out[key] = None if read.current is None else str(read.current)
    return out


def matches(read: OptionRead, wanted: str) -> bool:
    return read.current is not None and str(read.current) == wanted


def plan_host_options(hosts: dict[str, HostFacts], used: list[str],
                      wanted: dict[str, str]) -> list[HostOptionChange]:
    """The wanted options that differ on the hosts the plan uses (each read once)."""
    changes: list[HostOptionChange] = []
    for name in used:
        facts = hosts.get(name)
        if facts is None or not facts.usable:
            continue
        for key, value in sorted(wanted.items()):
            read = read_option(facts, key)
            if not matches(read, value):
                changes.append(HostOptionChange(name, key, read, value, facts.option_manager))
    return changes


def _typed(current: Any, wanted: str) -> Any:
    """The wanted value in the type the host keeps the option in (ESXi refuses a string
    for an integer option)."""
    if isinstance(current, bool):
        return wanted.lower() in {"1", "true", "yes", "on"}
    if isinstance(current, int):
        return type(current)(int(wanted))  # keeps pyVmomi's long a long
    return wanted


def apply_host_options(changes: list[HostOptionChange]) -> list[str]:
    """Set every option the host knows; RemoteError names each host that refused, with
    the esxcli command to run there instead. Returns what was set."""
    done: list[str] = []
    failures: list[str] = []
    for change in changes:
        command = esxcli_command(change.key, change.wanted)
        if change.current.current is None or change.option_manager is None:
            failures.append(f"{change.host}: {change.current.why}; run on the host: {command}")
            continue
        try:
            value = _typed(change.current.current, change.wanted)
            change.option_manager.UpdateOptions(changedValue=[
                vim.option.OptionValue(key=change.key, value=value)])
        except (ValueError, vmodl.MethodFault) as exc:
            why = getattr(exc, "msg", None) or str(exc) or type(exc).__name__
            failures.append(f"{change.host}: setting {change.key} failed ({why}); run on the "
                            f"host: {command}")
            continue
        done.append(f"{change.host}: {change.key} = {change.wanted}")
    if failures:
        raise RemoteError("ESXi advanced options not set:\n  " + "\n  ".join(failures))
    return done


def option_check_detail(read: OptionRead, wanted: str) -> tuple[bool, str]:
    """Preflight's verdict on one option: ok, or what is wrong and how to set it."""
    if matches(read, wanted):
        return True, f"{read.key} = {wanted}"
    command = esxcli_command(read.key, wanted)
    if read.current is None:
        return False, f"{read.why}: run on the host `{command}` (and reboot if it asks)"
    return False, (f"{read.key} is {read.current}, the scenario wants {wanted}: `vgpu apply` "
                   f"sets it, or run on the host `{command}`")

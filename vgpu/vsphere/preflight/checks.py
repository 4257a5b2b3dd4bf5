"""Pure: the preflight checks over facts already read from vCenter, no I/O. Per host:
ESXi version and build, the NVIDIA host driver (VIB) and whether its branch matches the
inventory's guest driver, GPUs (PCI vendor/device -> model) with their graphics type,
passthrough state and MIG capability, vGPU types offered, the host graphics default (must
be Shared Direct), MIG-backed types, free capacity per GPU beside what other VMs hold,
maintenance mode and connection state. For a scenario's plan: passthrough, assignment
policy, vGPU mode, template firmware and ATS NIC firmware. The report types live here."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from vgpu import mig
from vgpu.model.inventory import Inventory, RdmaNic
from vgpu.model.load import vgpu_requests
from vgpu.model.plan import Plan
from vgpu.model.scenario import Scenario
from vgpu.planner import HeldVgpu
from vgpu.vsphere.desired.assignment import CONSOLIDATION, ESXCLI_CONSOLIDATION, shared_gpus
from vgpu.vsphere.desired.ats import nic_firmware_todos
from vgpu.vsphere.desired.driver_compat import compatible, guest_branches
from vgpu.vsphere.plan.from_plan import gpu_order
from vgpu.vsphere.plan.gpu_modes import mig_esxi_problem
from vgpu.vsphere.plan.reconcile import EFI, EFI_TEMPLATE_FIX, template_firmware
from vgpu.vsphere.plan.workflow import ScenarioState
from vgpu.vsphere.read.facts import VGPU_MODE_MIG, HostFacts, driver_branch

MIN_ESXI = (7, 0)
MULTI_VGPU_ESXI = (8, 0)
MIG_TYPE = re.compile(r"-\d-\d+c(me)?$", re.IGNORECASE)
MIG_CAPABILITY_NOTE = ("MIG capability per GPU is read from the MIG-backed vGPU types the "
                       "host offers for the GPU's board where the host reports no per-GPU "
                       "vgpuMode (before ESXi 8.0 U3)")


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class GpuUsage:
    index: int
    pci_id: str
    model: str
    mode: str  # free | mig | timesliced | passthrough
    held: list[str]
    free_memory_slices: int | None
    free_compute_slices: int | None
    graphics_type: str | None = None  # configured per GPU (sharedDirect: vGPU)
    passthrough: str | None = None  # active | enabled, reboot pending | capable, off | ...
    mig_capable: bool | None = None  # from offered types; None: unknown GPU model
    board: str | None = None  # vGPU board code from the PCI device id, e.g. A100DX
    vgpu_mode: str | None = None  # HostGraphicsInfo.vgpuMode (ESXi 8.0 U3+), else None


@dataclass
class HostReport:
    name: str
    version: str | None
    build: str | None
    connection_state: str
    in_maintenance: bool
    graphics_default_type: str | None
    gpus: list[GpuUsage]
    vgpu_types: list[str]
    mig_types: list[str]
    checks: list[Check]
    host_driver: str | None = None  # the NVIDIA VIB's name
    host_driver_version: str | None = None
    host_driver_note: str | None = None  # why there is none
    assignment_policy: str | None = None  # sharedPassthruAssignmentPolicy
    hardware_uuid: str | None = None  # hardware.systemInfo.uuid
    reboot_required: bool | None = None  # summary.rebootRequired: installed, not running
    boot_time: str | None = None  # runtime.bootTime, ISO 8601 UTC
    # the advanced options that matter to GPU VMs (host_options.GPU_VM_OPTIONS and the
    # scenario's): key -> value, None where the host does not know the key
    advanced_options: dict[str, str | None] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)


@dataclass
class PreflightReport:
    vcenter: str
    vcenter_version: str
    inventory: str
    scenario: str | None
    taken_at: str
    hosts: list[HostReport]
    scenario_checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    id: str | None = None  # set when saved: the file's name without .json
    template: str | None = None  # placement.template, as vCenter has it
    template_firmware: str | None = None  # its config.firmware: efi or bios
    drift: dict[str, Any] | None = None  # against an earlier run, when asked

    @property
    def ok(self) -> bool:
        return all(h.ok for h in self.hosts) and all(c.ok for c in self.scenario_checks)

    def failures(self) -> list[str]:
        out = [f"{h.name}: {c.name}: {c.detail}" for h in self.hosts for c in h.checks
               if not c.ok]
        return out + [f"scenario: {c.name}: {c.detail}" for c in self.scenario_checks
                      if not c.ok]

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["ok"] = self.ok
        return data


def version_tuple(version: str | None) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version or "")[:3])


def _model_name(device_id: int) -> str:
    model = mig.gpu_model_for_pci(device_id)
    return model.key if model else f"unknown NVIDIA 0x{device_id:04x}"


def _expected_gpus(inventory: Inventory, host: str) -> list[tuple[str, int]]:
    for h in inventory.hosts:
        if h.name == host:
            return [(g.gpu.key, g.count) for g in h.gpus]
    return []


def _usage(facts: HostFacts, held: list[HeldVgpu], inventory: Inventory) -> list[GpuUsage]:
    order = gpu_order(facts, inventory)
    devices = {g.pci_id: g for g in facts.gpus}
    usage: list[GpuUsage] = []
    for index, pci in enumerate(order):
        device = devices.get(pci)
        model_key = _model_name(device.device_id) if device else "missing"
        model = mig.gpu_model_for_pci(device.device_id) if device else None
        mine = [h for h in held if h.host == facts.name and h.gpu_index == index]
        kinds = {h.kind for h in mine}
        mode = next(iter(kinds)) if len(kinds) == 1 else ("free" if not kinds else "mixed")
        free_mem: int | None = None
        free_compute: int | None = None
        if model is not None and mode in {"free", "mig"}:
            profiles = [model.profile(h.label) for h in mine if h.kind == "mig"]
            free_mem = model.memory_slices - sum(p.memory_slices for p in profiles)
            free_compute = model.compute_slices - sum(p.compute_slices for p in profiles)
        usage.append(GpuUsage(index, pci, model_key, mode,
                              [f"{h.label} ({h.vm})" for h in mine], free_mem, free_compute,
                              graphics_type=facts.graphics_per_gpu.get(pci),
                              passthrough=facts.passthrough_per_gpu.get(pci),
                              mig_capable=mig_capable(model, facts.vgpu_types,
                                                      facts.vgpu_mode_per_gpu.get(pci)),
                              vgpu_mode=facts.vgpu_mode_per_gpu.get(pci),
                              board=model.board_for_pci(device.device_id)
                              if model and device else None))
    return usage


def form_factor_notes(facts: HostFacts, inventory: Inventory) -> list[str]:
    """A note for each inventory GPU entry whose form_factor is not what the host's PCI
    device ids say: the plan names the vGPU types of the inventory's form factor."""
    host = next((h for h in inventory.hosts if h.name == facts.name), None)
    notes: list[str] = []
    for entry in host.gpus if host else []:
        listed = set(entry.pci_ids)
        devices = [g for g in facts.gpus if g.pci_id in listed or (
            not listed and mig.gpu_model_for_pci(g.device_id) == entry.gpu)]
        found = {v for g in devices if (v := entry.gpu.variant_for_pci(g.device_id))}
        wrong = sorted((v for v in found if v.form_factor != entry.form_factor),
                       key=lambda v: v.device_id)
        for variant in wrong:
            notes.append(
                f"{facts.name}: its {entry.gpu.key} GPUs are PCI device 0x{variant.device_id:04x}"
                f", form factor {variant.form_factor} (vGPU board {variant.board}), but the "
                f"inventory says form_factor {entry.form_factor}: set form_factor: "
                f"{variant.form_factor} so plans name the {variant.board} types (apply "
                "matches the host's types by PCI device id either way)")
    return notes


def mig_capable(model: mig.GpuModel | None, vgpu_types: list[str],
                vgpu_mode: str | None = None) -> bool | None:
    """Whether the GPU is in MIG mode: its vgpuMode where the host reports one (ESXi 8.0
    U3+), else whether the host offers a MIG-backed type for the GPU's board."""
    if vgpu_mode is not None:
        return vgpu_mode == VGPU_MODE_MIG
    if model is None:
        return None
    boards = {b.lower() for b in model.board_codes}
    for vgpu_type in vgpu_types:
        name = vgpu_type.lower().split("_", 1)[-1]
        if MIG_TYPE.search(name) and name.split("-", 1)[0] in boards:
            return True
    return False


def driver_checks(facts: HostFacts, inventory: Inventory) -> list[Check]:
    """The host driver VIB is there and its branch matches the guest driver's."""
    driver = facts.host_driver
    if driver is None:
        missing = facts.host_driver_note is not None and \
            facts.host_driver_note.startswith("no NVIDIA driver VIB")
        detail = facts.host_driver_note or "not read"
        if missing:
            detail += ": install the NVIDIA AI Enterprise host driver VIB " \
                      "(esxcli software vib install -d <bundle.zip>) and reboot the host"
        return [Check("host driver", not missing, detail)]
    checks = [Check("host driver", True, f"{driver.name} {driver.version}")]
    guest = inventory.drivers.guest_version()
    if guest is not None and driver.branch is not None:
        checks.append(_branch_check(driver.branch, driver.version, guest, tuple(
            inventory.drivers.compatible_guest_branches)))
    return checks


def driver_version_note(facts: HostFacts, inventory: Inventory) -> str | None:
    """A note when the host's VIB is not the inventory's drivers.host_driver_version."""
    expected = inventory.drivers.host_driver_version
    driver = facts.host_driver
    if not expected or driver is None or _same_version(driver.version, expected):
        return None
    return (f"{facts.name}: host driver VIB {driver.version} is not the inventory's "
            f"drivers.host_driver_version {expected}: install that VIB, or update "
            "drivers.host_driver_version")


def reboot_note(facts: HostFacts) -> str | None:
    """A note when the host has a reboot pending: what it reports installed (its VIB)
    is not what it runs until the next boot."""
    if not facts.reboot_required:
        return None
    driver = facts.host_driver
    installed = f"host driver VIB {driver.version}" if driver else "an installed update"
    return (f"{facts.name}: reboot pending: {installed} is installed, not running (booted "
            f"{facts.boot_time or 'at an unknown time'}); reboot the host in maintenance "
            "mode before measuring on it")


def _branch_check(host_branch: int, host_version: str, guest: str,
                  declared: tuple[int, ...]) -> Check:
    guest_branch = driver_branch(guest)
    if guest_branch is None or guest_branch == host_branch:
        return Check("driver branch", True, f"host and guest drivers on branch {host_branch}")
    verdict = compatible(host_branch, guest_branch, declared)
    if verdict.ok:
        return Check("driver branch", True,
                     f"host VIB {host_version} (branch {host_branch}) runs the inventory's "
                     f"guest driver {guest} (branch {guest_branch}): {verdict.why}")
    return Check("driver branch", False,
                 f"host VIB {host_version} is branch {host_branch}, the inventory's guest "
                 f"driver {guest} is branch {guest_branch}: {verdict.why}; install a guest "
                 f"driver of branch {'/'.join(map(str, guest_branches(host_branch)))} "
                 f"(drivers.guest_driver), or the branch-{guest_branch} host driver VIB on "
                 "this host")


def _same_version(vib_version: str, expected: str) -> bool:
    """535.161.05-1OEM.800.1.0.20613240 is 535.161.05."""
    return vib_version == expected or vib_version.startswith(expected + "-")


def _rdma_nic_check(facts: HostFacts, nic: RdmaNic) -> Check:
    """The inventory's RDMA NIC is in the host and ready for the way VMs get it."""
    name = f"RDMA NIC {nic.pci_id}"
    device = facts.pci_devices.get(nic.pci_id)
    if device is None:
        others = sorted(p for p, d in facts.pci_devices.items() if d.vendor_id == 0x15B3)
        return Check(name, False, f"no PCI device at {nic.pci_id} on this host (its Mellanox/"
                     f"NVIDIA NICs: {', '.join(others) or 'none'}): fix the NIC's pci_id in "
                     "the inventory's rdma_nics, or seat the NIC")
    found = f"{device.name or 'PCI device'} (0x{device.vendor_id:04x}:0x{device.device_id:04x})"
    if nic.kind == "sriov" and not (device.sriov_enabled and device.virtual_functions):
        return Check(name, False, f"{found}: SR-IOV is not enabled (virtual functions: "
                     f"{device.virtual_functions}): enable it on {nic.pci_id} in the vSphere "
                     "Client (Host > Configure > PCI Devices) or with the NIC driver's "
                     "max_vfs module parameter (esxcli system module parameters set -m "
                     "nmlx5_core -p max_vfs=8), then reboot the host")
    if nic.kind == "passthrough" and device.passthrough != "active":
        return Check(name, False, f"{found}: passthrough is {device.passthrough or 'unknown'}"
                     f": esxcli hardware pci pcipassthru set -d {nic.pci_id} -e true -a, "
                     "then reboot the host if it asks")
    state = f"{device.virtual_functions} virtual functions" if nic.kind == "sriov" \
        else f"passthrough {device.passthrough}" if nic.kind == "passthrough" else "present"
    return Check(name, True, f"{found}, {nic.kind}: {state}")


def rdma_nic_checks(facts: HostFacts, inventory: Inventory) -> list[Check]:
    host = next((h for h in inventory.hosts if h.name == facts.name), None)
    return [_rdma_nic_check(facts, nic) for nic in (host.rdma_nics if host else [])]


def host_checks(facts: HostFacts, inventory: Inventory,
                kinds: set[str] | None = None) -> list[Check]:
    checks = [
        Check("connection", facts.connection_state == "connected",
              facts.connection_state if facts.connection_state == "connected"
              else f"{facts.connection_state}: reconnect the host in vCenter"),
        Check("maintenance mode", not facts.in_maintenance,
              "in maintenance mode: exit it before apply" if facts.in_maintenance else "off"),
    ]
    checks.append(esxi_check(facts, kinds))
    found: dict[str, int] = {}
    for g in facts.gpus:
        found[_model_name(g.device_id)] = found.get(_model_name(g.device_id), 0) + 1
    found_text = ", ".join(f"{n} x {m}" for m, n in found.items()) or "none"
    expected = _expected_gpus(inventory, facts.name)
    if not facts.gpus:
        checks.append(Check("GPUs", False, "no NVIDIA GPU in the host's PCI device list: "
                                           "check the hardware and that the host sees it"))
    elif expected and any(found.get(m, 0) != n for m, n in expected):
        want = ", ".join(f"{n} x {m}" for m, n in expected)
        checks.append(Check("GPUs", False, f"found {found_text}, the inventory says {want}"))
    else:
        checks.append(Check("GPUs", True, found_text))
    return checks + vgpu_checks(facts, inventory, kinds) + rdma_nic_checks(facts, inventory)


def esxi_check(facts: HostFacts, kinds: set[str] | None) -> Check:
    """ESXi 7.0 or later; 7.0 Update 2 or later where MIG-backed vGPUs may run (``kinds``
    holds mig, or None: no scenario, check everything)."""
    if version_tuple(facts.version) < MIN_ESXI:
        return Check("ESXi version", False,
                     f"{facts.version or 'unknown'} build {facts.build or 'unknown'}: vgpu "
                     "needs ESXi 7.0 or later (7.0 Update 2 for MIG-backed vGPU)")
    problem = mig_esxi_problem(facts) if kinds is None or "mig" in kinds else None
    return Check("ESXi version", problem is None,
                 problem or f"{facts.version} build {facts.build}")


def vgpu_checks(facts: HostFacts, inventory: Inventory, kinds: set[str] | None) -> list[Check]:
    """vGPU readiness (types offered, MIG-backed types, Shared Direct, host driver VIB):
    checked where the scenario uses vGPUs (``kinds`` holds mig / timesliced / passthrough;
    None: no scenario, check everything). Whole-GPU passthrough needs none of it."""
    uses_vgpu = kinds is None or bool(kinds & {"mig", "timesliced"})
    if not uses_vgpu:
        return [Check(name, True, "not needed: the scenario passes whole GPUs through")
                for name in ("vGPU types", "MIG-backed types", "graphics default",
                             "host driver")]
    checks = [Check(
        "vGPU types", bool(facts.vgpu_types),
        f"{len(facts.vgpu_types)} offered" if facts.vgpu_types
        else "none offered: install the NVIDIA AI Enterprise host driver (VIB) and reboot")]
    mig_types = [t for t in facts.vgpu_types if MIG_TYPE.search(t)]
    if kinds is None or "mig" in kinds:
        checks.append(Check(
            "MIG-backed types", bool(mig_types),
            f"{len(mig_types)} offered" if mig_types
            else "none: enable MIG mode on the GPUs (nvidia-smi -mig 1) and reboot the host"))
    shared_direct = facts.graphics_default_type == "sharedDirect"
    checks.append(Check(
        "graphics default", shared_direct,
        "Shared Direct" if shared_direct
        else f"{facts.graphics_default_type or 'unknown'}: set it to Shared Direct "
             "(esxcli graphics host set --default-type SharedPassthru) and restart xorg"))
    return checks + driver_checks(facts, inventory)


def scenario_kinds(scenario: Scenario) -> set[str]:
    """The vGPU kinds the scenario asks for: mig, timesliced, passthrough."""
    return {r.kind for requests in vgpu_requests(scenario).values() for r in requests}


def _planned_passthrough(plan: Plan, hosts: dict[str, HostFacts],
                         inventory: Inventory) -> list[tuple[str, str, int, str]]:
    """(VM, host, GPU index, PCI id) of every GPU the plan passes through."""
    out: list[tuple[str, str, int, str]] = []
    for vm in plan.vms:
        facts = hosts.get(vm.host)
        if facts is None:
            continue
        order = gpu_order(facts, inventory)
        for v in vm.vgpus:
            if v.kind != "passthrough":
                continue
            pci = v.pci_id or (order[v.gpu_index] if v.gpu_index < len(order) else None)
            if pci is not None:
                out.append((vm.name, vm.host, v.gpu_index, pci))
    return out


def passthrough_checks(plan: Plan, hosts: dict[str, HostFacts], inventory: Inventory,
                        notes: list[str]) -> list[Check]:
    """Every GPU the plan passes through is active in passthrough (HostPciPassthruInfo);
    one that looks left in MIG mode gets a note."""
    planned = _planned_passthrough(plan, hosts, inventory)
    if not planned:
        return []
    problems: list[str] = []
    for vm, host, index, pci in planned:
        facts = hosts[host]
        state = facts.passthrough_per_gpu.get(pci)
        where = f"{host} GPU {index} ({pci}) for {vm}"
        if state != "active":
            problems.append(f"{where}: passthrough is {state or 'unknown'}: run on the host "
                            f"`esxcli hardware pci pcipassthru set -d {pci} -e true -a` (or "
                            "Host > Configure > PCI Devices), then reboot it if it asks")
        mig_sign = _mig_mode_sign(facts, pci)
        if mig_sign:
            notes.append(f"{where}: the GPU looks left in MIG mode ({mig_sign}); passed "
                         "through, the guest sees a MIG-mode GPU without GPU instances and "
                         "CUDA finds no device: turn MIG off (`nvidia-smi -i <index> -mig 0` "
                         "on the host before passthrough, or in the guest, then reset the "
                         "GPU), or create GPU instances in the guest")
    if problems:
        return [Check("passthrough GPUs", False, "; ".join(problems))]
    return [Check("passthrough GPUs", True,
                  f"{len(planned)} planned GPU(s) active in passthrough")]


def _mig_mode_sign(facts: HostFacts, pci: str) -> str | None:
    """Why the GPU looks to be in MIG mode: the host's per-GPU vGPU mode (ESXi 8.0 U3),
    else MIG-backed types offered for its board; None when neither says so."""
    mode = facts.vgpu_mode_per_gpu.get(pci)
    if mode is not None:
        return f"vgpuMode {mode}" if mode == VGPU_MODE_MIG else None
    device = next((g for g in facts.gpus if g.pci_id == pci), None)
    model = mig.gpu_model_for_pci(device.device_id) if device else None
    if mig_capable(model, facts.vgpu_types):
        return "the host offers MIG-backed vGPU types for its board"
    return None


def policy_checks(plan: Plan, hosts: dict[str, HostFacts]) -> list[Check]:
    """Where the plan shares a GPU, the host must consolidate (apply sets it)."""
    checks: list[Check] = []
    for host, gpus in sorted(shared_gpus(plan).items()):
        facts = hosts.get(host)
        policy = facts.assignment_policy if facts else None
        if policy == CONSOLIDATION:
            detail = f"{host}: {CONSOLIDATION}, as the plan needs for {', '.join(gpus)}"
        else:
            detail = (f"{host}: {policy or 'unknown'}, which spreads VMs over GPUs; the plan "
                      f"shares {', '.join(gpus)}: `vgpu apply` sets {CONSOLIDATION} "
                      f"(or run on the host `{ESXCLI_CONSOLIDATION}`)")
        checks.append(Check("GPU assignment policy", True, detail))
    return checks


def vgpu_mode_checks(plan: Plan, hosts: dict[str, HostFacts],
                     inventory: Inventory) -> list[Check]:
    """Each GPU the plan gives MIG-backed vGPUs is in MIG mode, and each GPU it gives
    time-sliced vGPUs is not, where the host reports the GPU's vgpuMode; no check where no
    planned GPU's mode is reported."""
    problems: list[str] = []
    seen = 0
    for gpu in plan.gpus:
        facts = hosts.get(gpu.host)
        if facts is None or gpu.mode not in {"mig", "timesliced"}:
            continue
        order = gpu_order(facts, inventory)
        pci = gpu.pci_id or (order[gpu.index] if gpu.index < len(order) else None)
        mode = facts.vgpu_mode_per_gpu.get(pci or "")
        if mode is None:
            continue
        seen += 1
        if (gpu.mode == "mig") != (mode == VGPU_MODE_MIG):
            fix = (f"enable MIG on it (nvidia-smi -i <index> -mig 1 on {gpu.host}) and reboot"
                   if gpu.mode == "mig" else "turn MIG off on it or plan MIG profiles")
            problems.append(f"{gpu.host} GPU {gpu.index} ({pci}) is planned {gpu.mode} but "
                            f"its vgpuMode is {mode}: {fix}")
    if not seen:
        return []
    return [Check("GPU vGPU mode", not problems, "; ".join(problems)
                  or f"{seen} planned GPU(s) in the mode the plan needs (vgpuMode)")]


def template_checks(scenario_state: ScenarioState) -> list[Check]:
    """The boot settings clones get: the template's firmware must be EFI."""
    template = template_firmware(scenario_state.state)
    if template is None:
        return []
    name, firmware = template
    if firmware == EFI:
        return [Check("template firmware", True, f"{name}: EFI (clones boot with EFI)")]
    return [Check("template firmware", False, f"{name}: {firmware}; vGPU VMs need EFI and a "
                  f"guest installed under {firmware} does not boot once switched: "
                  f"{EFI_TEMPLATE_FIX}")]


def _bridges(plan: Plan, hosts: dict[str, HostFacts],
             inventory: Inventory) -> dict[tuple[str, str], tuple[str, ...]]:
    """(host, RDMA NIC) -> the PCIe bridges above the NIC and above its VMs' GPUs."""
    out: dict[tuple[str, str], set[str]] = {}
    for vm in plan.vms:
        facts = hosts.get(vm.host)
        if vm.rdma_nic is None or facts is None:
            continue
        order = gpu_order(facts, inventory)
        devices = [vm.rdma_nic.pci_id, *(v.pci_id or order[v.gpu_index] for v in vm.vgpus
                                         if v.pci_id or v.gpu_index < len(order))]
        found = out.setdefault((vm.host, vm.rdma_nic.pci_id), set())
        for pci in devices:
            device = facts.pci_devices.get(pci)
            if device is not None and device.parent_bridge:
                found.add(device.parent_bridge)
    return {key: tuple(sorted(value)) for key, value in out.items()}


def add_nic_firmware_checks(scenario_state: ScenarioState, plan: Plan,
                             reports: list[HostReport]) -> None:
    """Each NIC the plan uses gets the scenario's ATS firmware step as a check: passed once
    the inventory records it done, else failed with what to run and reboot."""
    hosts = scenario_state.state.hosts
    todos = nic_firmware_todos(scenario_state.scenario, scenario_state.inventory, plan,
                               _bridges(plan, hosts, scenario_state.inventory))
    by_host = {r.name: r for r in reports}
    for todo in todos:
        if todo.host in by_host:
            by_host[todo.host].checks.append(
                Check(f"ATS NIC firmware {todo.nic}", todo.done, todo.describe()))


def excuse_unused_maintenance(reports: list[HostReport], used: set[str]) -> None:
    """A host in maintenance mode that the plan leaves out does not fail the scenario."""
    for report in reports:
        if report.name in used:
            continue
        for k, check in enumerate(report.checks):
            if check.name == "maintenance mode" and not check.ok:
                report.checks[k] = Check(check.name, True,
                                         "in maintenance mode: the plan does not use this host")


def host_report(name: str, facts: HostFacts | None, held: list[HeldVgpu],
                 inventory: Inventory, all_hosts: list[str],
                 kinds: set[str] | None = None) -> HostReport:
    if facts is None:
        return HostReport(name, None, None, "absent", False, None, [], [], [], [
            Check("in vCenter", False,
                  f"not found; the cluster has: {', '.join(sorted(all_hosts)) or 'none'}")])
    return HostReport(
        name=name, version=facts.version, build=facts.build,
        connection_state=facts.connection_state, in_maintenance=facts.in_maintenance,
        graphics_default_type=facts.graphics_default_type,
        gpus=_usage(facts, held, inventory), vgpu_types=list(facts.vgpu_types),
        mig_types=[t for t in facts.vgpu_types if MIG_TYPE.search(t)],
        checks=host_checks(facts, inventory, kinds),
        host_driver=facts.host_driver.name if facts.host_driver else None,
        host_driver_version=facts.host_driver.version if facts.host_driver else None,
        host_driver_note=facts.host_driver_note, assignment_policy=facts.assignment_policy,
        hardware_uuid=facts.hardware_uuid, reboot_required=facts.reboot_required,
        boot_time=facts.boot_time)


def held_gpu_model(inventory: Inventory, hosts: dict[str, HostFacts]) -> mig.GpuModel | None:
    """The GPU model to count held vGPUs against: the inventory's, else the first found."""
    for host in inventory.hosts:
        for g in host.gpus:
            return g.gpu
    for facts in hosts.values():
        for device in facts.gpus:
            model = mig.gpu_model_for_pci(device.device_id)
            if model is not None:
                return model
    return None

"""Run a change set against vCenter: one worker per VM, bounded concurrency, each VM's
steps in order. A failing step stops that VM only; the others finish."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pyVmomi import vim, vmodl

from vgpu.errors import RemoteError
from vgpu.vsphere.apply.power import shut_down
from vgpu.vsphere.connect.connection import VmPlacementObjects, widen_connection_pool
from vgpu.vsphere.connect.tasks import call, describe_fault
from vgpu.vsphere.connect.taskwatch import TaskWatcher
from vgpu.vsphere.desired.instances import InstanceRecord
from vgpu.vsphere.desired.limits import (
    DEFAULT_CONCURRENCY,
    DEFAULT_IP_TIMEOUT_S,
    DEFAULT_SHUTDOWN_TIMEOUT_S,
)
from vgpu.vsphere.desired.vm import INSTANCE_KEY
from vgpu.vsphere.plan import specs
from vgpu.vsphere.plan.diff import Action, ChangeSet, Step, VmChange
from vgpu.vsphere.read.facts import HostFacts, VmActual, first_nic, nic_network

StepCallback = Callable[[str, Step], None]
DoneCallback = Callable[[str, "VmOutcome"], None]


@dataclass
class VmOutcome:
    name: str
    action: Action
    ok: bool
    error: str | None = None
    tasks: int = 0
    seconds: float = 0.0
    steps_done: list[Step] = field(default_factory=list)
    shutdown: str | None = None  # how the VM went off (power.shut_down), when it did


@dataclass
class ExecutionReport:
    outcomes: list[VmOutcome]
    seconds: float
    task_reads: int = 0  # property-collector rounds that watched the tasks
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[VmOutcome]:
        return [o for o in self.outcomes if not o.ok]

    @property
    def tasks(self) -> int:
        return sum(o.tasks for o in self.outcomes)


@dataclass
class _VmRun:
    """State of one VM's work; counts the tasks it starts."""

    change: VmChange
    outcome: VmOutcome
    watcher: TaskWatcher
    vm: Any = None
    powered_on: bool = False
    started: float = 0.0

    def task(self, what: str, method: Any, *args: Any, **kwargs: Any) -> Any:
        self.outcome.tasks += 1
        return call(f"{what} of VM {self.change.name}", method, *args,
                    watcher=self.watcher, **kwargs)


def _before_power_on(steps: list[Step]) -> list[Step]:
    return steps[:steps.index(Step.POWER_ON)] if Step.POWER_ON in steps else steps


def _after_power_on(steps: list[Step]) -> list[Step]:
    return steps[steps.index(Step.POWER_ON) + 1:] if Step.POWER_ON in steps else []


def power_on_turns(runs: list[_VmRun]) -> list[list[_VmRun]]:
    """The VMs to power on, in turns that run concurrently: the vGPU VMs of one host in
    one turn, GPU by GPU in the plan's order and largest vGPU first on each (so a
    consolidating host fills its GPUs as planned); every other VM alone."""
    hosts: dict[str, list[_VmRun]] = {}
    turns: list[list[_VmRun]] = []
    for run in runs:
        want = run.change.desired
        if Step.POWER_ON not in run.change.steps:
            continue
        if want is None or not want.planned_gpus:
            turns.append([run])
            continue
        hosts.setdefault(want.host, []).append(run)
    for turn in hosts.values():
        turn.sort(key=lambda r: (_order(r), r.change.name))
        turns.append(turn)
    return turns


def _order(run: _VmRun) -> tuple[int, int, int]:
    return run.change.desired.power_on_order if run.change.desired else (0, 0, 0)


def _gpu_vm(run: _VmRun) -> bool:
    want = run.change.desired
    return want is not None and bool(want.vgpus or want.passthrough)


def _is_manual(override: Any) -> bool:
    return override is not None and override.behavior == "manual" and \
        override.enabled is not False


def drs_manual_spec(vm: Any, existing: Any) -> Any:
    """A per-VM DRS override: DRS stays on for the VM but only recommends (manual)."""
    return vim.cluster.DrsVmConfigSpec(
        operation="edit" if existing is not None else "add",
        info=vim.cluster.DrsVmConfigInfo(key=vm, enabled=True, behavior="manual"))


class Executor:
    def __init__(
        self, placement: VmPlacementObjects, hosts: dict[str, HostFacts], *,
        concurrency: int = DEFAULT_CONCURRENCY, ip_timeout_s: float = DEFAULT_IP_TIMEOUT_S,
        shutdown_timeout_s: float = DEFAULT_SHUTDOWN_TIMEOUT_S,
        on_step: StepCallback | None = None, on_done: DoneCallback | None = None,
    ) -> None:
        self.placement = placement
        self.hosts = hosts
        self.concurrency = max(1, concurrency)
        self.ip_timeout_s = ip_timeout_s
        self.shutdown_timeout_s = shutdown_timeout_s
        self.on_step = on_step
        self.on_done = on_done
        self.instances = InstanceRecord(placement.lab)
        self._network_backing: Any = None  # the planned network's NIC backing
        self._clone_nic: Any = None  # the clone spec's edit of the template's first NIC

    def run(self, changes: ChangeSet) -> ExecutionReport:
        """Deletions first (they free vGPU capacity), then creates and changes. A host's
        vGPU VMs power on one at a time, GPU by GPU and largest vGPU first: ESXi picks the
        GPU and the vGPU manager places a MIG GPU instance at power-on, so concurrent
        power-ons land on other GPUs than planned and a small instance placed first can
        block a large one. Everything else runs concurrently."""
        start = time.monotonic()
        pending = changes.pending
        deletes = [c for c in pending if c.action is Action.DELETE]
        others = [c for c in pending if c.action is not Action.DELETE]
        outcomes: list[VmOutcome] = []
        self._prepare_network(others)
        widen_connection_pool(self.placement.datacenter, self.concurrency + 1)  # +1: watcher
        with TaskWatcher() as watcher, ThreadPoolExecutor(
                max_workers=self.concurrency, thread_name_prefix="vgpu-apply") as pool:
            runs = [self._start(c, watcher) for c in deletes]
            list(pool.map(lambda r: self._steps(r, r.change.steps), runs))
            outcomes += [self._finish(r) for r in runs]
            runs = [self._start(c, watcher) for c in others]
            list(pool.map(lambda r: self._steps(r, _before_power_on(r.change.steps)), runs))
            notes = self._pin_to_planned_hosts(runs, watcher)
            list(pool.map(self._power_on_in_turn, power_on_turns(runs)))
            list(pool.map(lambda r: self._steps(r, _after_power_on(r.change.steps)), runs))
            outcomes += [self._finish(r) for r in runs]
        return ExecutionReport(outcomes=outcomes, seconds=time.monotonic() - start,
                               task_reads=watcher.rounds, notes=notes)

    def _pin_to_planned_hosts(self, runs: list[_VmRun], watcher: TaskWatcher) -> list[str]:
        """Give the GPU VMs about to power on a manual DRS override: DRS places a VM at
        power-on (partially automated too) and would take it away from its planned GPUs.
        One cluster reconfiguration for all; returns a note when it could not be set (the
        host is then re-checked after each power-on)."""
        cluster = self.placement.cluster
        try:
            config = cluster.configurationEx if cluster is not None else None
        except vmodl.MethodFault as exc:
            return [f"the cluster's DRS settings could not be read ({describe_fault(exc)}); "
                    "each GPU VM's host is checked after it powers on"]
        if config is None or not getattr(config.drsConfig, "enabled", False):
            return []
        have = {o.key._moId: o for o in config.drsVmConfig or []}
        specs = [drs_manual_spec(r.vm, have.get(r.vm._moId)) for r in runs
                 if r.outcome.ok and r.vm is not None and _gpu_vm(r)
                 and Step.POWER_ON in r.change.steps
                 and not _is_manual(have.get(r.vm._moId))]
        if not specs:
            return []
        try:
            call(f"manual DRS override for {len(specs)} GPU VM(s)",
                 cluster.ReconfigureComputeResource_Task, watcher=watcher,
                 spec=vim.cluster.ConfigSpecEx(drsVmConfigSpec=specs), modify=True)
        except RemoteError as exc:
            return [f"{exc}; DRS may move GPU VMs at power-on (each VM's host is checked "
                    "after it powers on)"]
        return []

    def _prepare_network(self, changes: list[VmChange]) -> None:
        """Read the planned network's backing and the template's first NIC once, before the
        workers start, when a VM names a network."""
        if not any(c.desired is not None and c.desired.port_group for c in changes):
            return
        self._network_backing = specs.nic_backing(self.placement.network)
        template = self.placement.template
        if template is not None:
            nic = first_nic(template.config.hardware.device or [])
            self._clone_nic = specs.clone_nic_change(nic, self._network_backing)

    def _check_network(self, run: _VmRun) -> None:
        """Re-read the clone's first NIC: it must be on the planned network."""
        want = run.change.desired
        assert want is not None
        if not want.port_group:
            return
        found = nic_network(first_nic(run.vm.config.hardware.device or []),
                            {self.placement.network._moId: want.port_group})
        if found != want.port_group:
            raise RemoteError(
                f"VM {want.name}: its first NIC is on {found or 'no network'} after the clone, "
                f"not on the planned network {want.port_group}; check that {want.port_group} "
                f"reaches host {want.host}, then run apply again")

    def _start(self, change: VmChange, watcher: TaskWatcher) -> _VmRun:
        run = _VmRun(change, VmOutcome(change.name, change.action, ok=True), watcher)
        if change.actual is not None:
            run.vm, run.powered_on = change.actual.ref, change.actual.powered_on
        run.started = time.monotonic()
        try:
            self._check_host(change)
        except RemoteError as exc:
            run.outcome.ok, run.outcome.error = False, str(exc)
        return run

    def _steps(self, run: _VmRun, steps: list[Step]) -> None:
        """Run ``steps`` of one VM in order; the first failure stops that VM only."""
        if not run.outcome.ok:
            return
        try:
            for step in steps:
                if self.on_step:
                    self.on_step(run.change.name, step)
                self._do(run, step)
                run.outcome.steps_done.append(step)
        except RemoteError as exc:
            run.outcome.ok, run.outcome.error = False, str(exc)
        except Exception as exc:  # one VM's failure must not stop the others
            run.outcome.ok = False
            run.outcome.error = f"{run.change.name}: unexpected {type(exc).__name__}: {exc}"

    def _power_on_in_turn(self, turn: list[_VmRun]) -> None:
        """One host's vGPU VMs, one after the other (a failed one does not stop the rest)."""
        for run in turn:
            self._steps(run, [Step.POWER_ON])

    def _finish(self, run: _VmRun) -> VmOutcome:
        run.outcome.seconds = time.monotonic() - run.started
        if self.on_done:
            self.on_done(run.change.name, run.outcome)
        return run.outcome

    def _check_host(self, change: VmChange) -> None:
        if change.desired is None:
            return
        host = self.hosts.get(change.desired.host)
        if host is None:
            raise RemoteError(f"VM {change.name}: host {change.desired.host} is not in the "
                              f"cluster (hosts: {', '.join(sorted(self.hosts)) or 'none'})")
        problem = host.state_problem()
        if problem:
            raise RemoteError(f"VM {change.name} not touched: {problem}")

    def _host_ref(self, name: str) -> Any:
        return self.hosts[name].ref

    def _do(self, run: _VmRun, step: Step) -> None:
        handler = {
            Step.POWER_OFF: self._power_off,
            Step.CLONE: self._clone,
            Step.RELOCATE: self._relocate,
            Step.RECONFIGURE: self._reconfigure,
            Step.CUSTOMIZE: self._customize,
            Step.POWER_ON: self._power_on,
            Step.WAIT_IP: self._wait_ip,
            Step.DESTROY: self._destroy,
        }[step]
        handler(run)

    def _power_off(self, run: _VmRun) -> None:
        if run.powered_on:
            run.outcome.shutdown = shut_down(
                run.vm, self.shutdown_timeout_s,
                lambda: run.task("power off", run.vm.PowerOffVM_Task))
            run.powered_on = False

    def _clone(self, run: _VmRun) -> None:
        want = run.change.desired
        assert want is not None
        if self.placement.template is None:
            raise RemoteError(f"VM {want.name}: the inventory names no template to clone")
        spec = specs.clone_spec(want, self.placement.resource_pool, self.placement.datastore,
                                self._host_ref(want.host),
                                self._clone_nic if want.port_group else None)
        run.vm = run.task("clone", self.placement.template.CloneVM_Task,
                          folder=self.placement.folder, name=want.name, spec=spec)
        self.instances.add(run.vm.config.instanceUuid, want.name, want.owner.scenario)
        self._check_network(run)
        # vCenter places the clone on the requested host; a clone that landed elsewhere
        # (as the simulator's does) is moved before its hardware is set.
        if run.vm.runtime.host._moId != self._host_ref(want.host)._moId:
            self._relocate(run)

    def _relocate(self, run: _VmRun) -> None:
        want = run.change.desired
        assert want is not None
        run.task("relocate", run.vm.RelocateVM_Task,
                 spec=vim.vm.RelocateSpec(host=self._host_ref(want.host)))

    def _reconfigure(self, run: _VmRun) -> None:
        want = run.change.desired
        assert want is not None
        have: VmActual | None = run.change.actual
        needs_ids = want.passthrough or (want.rdma_nic and want.rdma_nic.kind != "pvrdma")
        system_ids = self._passthrough_system_ids(run, want.host) if needs_ids else {}
        spec = self._with_instance_mark(
            run, specs.reconfigure_spec(want, have, system_ids, self._network_backing))
        if spec is not None:
            run.task("reconfigure", run.vm.ReconfigVM_Task, spec=spec)

    @staticmethod
    def _with_instance_mark(run: _VmRun, spec: Any | None) -> Any | None:
        """Add the VM's own instanceUuid as its ``vgpu.instance_uuid`` mark where it is not
        there yet (a fresh clone): a later clone of the VM then shows as a copy."""
        have: VmActual | None = run.change.actual
        uuid = have.instance_uuid if have is not None else run.vm.config.instanceUuid
        if not uuid or (have is not None and have.extra_config.get(INSTANCE_KEY) == uuid):
            return spec
        spec = spec if spec is not None else vim.vm.ConfigSpec()
        spec.extraConfig = [*(spec.extraConfig or []),
                            vim.option.OptionValue(key=INSTANCE_KEY, value=uuid)]
        return spec

    def _passthrough_system_ids(self, run: _VmRun, host: str) -> dict[str, str]:
        """PCI address -> system id, as the host's config target lists its passthrough
        devices; the host's hardware UUID where the target lists none (the simulator)."""
        host_ref = self._host_ref(host)
        target = run.vm.environmentBrowser.QueryConfigTarget(host=host_ref)
        listed = {p.pciDevice.id: p.systemId for p in target.pciPassthrough or []
                  if getattr(p, "pciDevice", None) is not None}
        fallback = host_ref.hardware.systemInfo.uuid
        want = run.change.desired
        pci_ids = [d.pci_id for d in want.passthrough] if want else []
        if want and want.rdma_nic:
            pci_ids.append(want.rdma_nic.pci_id)
        return {pci: listed.get(pci, fallback) for pci in pci_ids}

    def _customize(self, run: _VmRun) -> None:
        want = run.change.desired
        assert want is not None and want.network is not None
        run.task("guest customization", run.vm.CustomizeVM_Task,
                 spec=specs.customization_spec(want.name, want.network, want.rdma_adapters))

    def _power_on(self, run: _VmRun) -> None:
        if not run.powered_on:
            run.task("power on", run.vm.PowerOnVM_Task)
            run.powered_on = True
            self._check_not_moved(run)

    def _check_not_moved(self, run: _VmRun) -> None:
        """A GPU VM that DRS moved at power-on is not on its planned GPUs."""
        want = run.change.desired
        if want is None or not _gpu_vm(run):
            return
        now = run.vm.runtime.host
        if now is not None and now._moId != self._host_ref(want.host)._moId:
            raise RemoteError(
                f"VM {want.name} was moved to host {now.name} at power-on (DRS), not its "
                f"planned {want.host}: give it a manual DRS override (cluster > Configure > "
                "VM Overrides) or set DRS to manual, power it off and run `vgpu apply` again")

    def _wait_ip(self, run: _VmRun) -> None:
        want = run.change.desired
        assert want is not None and want.network is not None
        deadline = time.monotonic() + self.ip_timeout_s
        delay = 0.05
        while True:
            ip = run.vm.guest.ipAddress
            if ip == want.network.ip:
                return
            if time.monotonic() > deadline:
                raise RemoteError(
                    f"VM {want.name} did not report IP {want.network.ip} within "
                    f"{self.ip_timeout_s:.0f} s (it reports {ip or 'none'}); check that "
                    "VMware Tools runs in the template and the customization applied")
            time.sleep(delay)
            delay = min(delay * 2, 2.0)

    def _destroy(self, run: _VmRun) -> None:
        run.task("destroy", run.vm.Destroy_Task)
        have = run.change.actual
        if have is not None and have.instance_uuid:
            self.instances.remove(have.instance_uuid)

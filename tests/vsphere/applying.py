"""Hand-built desired VMs (scenario 8's MIG 1g.10gb VMs by default) applied on the vcsim
lab, and the lab's state read back: what the reconcile tests start from."""

from __future__ import annotations

from tests.labs.vcsim import VcsimLab
from vgpu.vsphere.apply.execute import ExecutionReport, Executor
from vgpu.vsphere.connect.connection import connect
from vgpu.vsphere.desired.vm import GuestNetwork, OwnerMarks, VmDesired
from vgpu.vsphere.plan.diff import ChangeSet
from vgpu.vsphere.plan.reconcile import ClusterState, plan_apply, read_state

MIG_KEYS = {"pciPassthru.use64bitMMIO": "TRUE", "pciPassthru.64bitMMIOSizeGB": "64",
            "pciPassthru.allowP2P": "TRUE", "pciPassthru.RelaxACSforP2P": "TRUE"}


def desired_vms(count: int, *, scenario: str = "8", plan_hash: str = "h1",
                hosts: tuple[str, ...] = ("DC0_C0_H0",), guest_ids: dict[int, str] | None = None,
                vcpu: int = 32, first_ip: int = 11) -> list[VmDesired]:
    return [
        VmDesired(
            name=f"s{scenario}-1g-{i + 1}", host=hosts[i % len(hosts)], num_cpus=vcpu,
            memory_mb=65536, owner=OwnerMarks(scenario, plan_hash),
            vgpus=("grid_a100d-1-10c",), extra_config=dict(MIG_KEYS),
            network=GuestNetwork(ip=f"127.0.0.{first_ip + i}", netmask="255.0.0.0",
                                 gateway="127.0.0.1"),
            guest_id=(guest_ids or {}).get(i),
        )
        for i in range(count)
    ]


def apply(lab: VcsimLab, desired: list[VmDesired], scenario: str = "8",
          ) -> tuple[ChangeSet, ExecutionReport]:
    with connect(lab.target()) as session:
        state = read_state(session, lab.placement_names())
        changes = plan_apply(state, desired, scenario, "test")
        return changes, Executor(state.placement, state.hosts).run(changes)


def state_of(lab: VcsimLab) -> ClusterState:
    with connect(lab.target()) as session:
        return read_state(session, lab.placement_names())

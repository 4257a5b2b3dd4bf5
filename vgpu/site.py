"""The lab a command works on, worked out once per command: the inventory (where it was
found, loaded and checked), the simulated lab behind it if there is one, and each
scenario's plan on it. The CLI makes one Site per command (``vgpu.cli.common.site_of``)
and hands it down to bench, provision, revalidate, training and bare-metal apply, so no
layer below finds, loads or plans the inventory again.

The simulator (``vgpu.sim``) sits behind one seam: :class:`SimulatedLab`, defined here and
implemented by ``vgpu.sim.follow.FollowingLab``. :func:`open_site` is the one place outside
the simulator's own commands that imports ``vgpu.sim``, inside the function, so a command
given no inventory never loads it (``tests/architecture/test_import_graph.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from vgpu import catalog
from vgpu.errors import InputError
from vgpu.model.inventory import Inventory
from vgpu.model.load import load_inventory
from vgpu.model.plan import Plan
from vgpu.model.scenario import HarnessRuntime, Scenario
from vgpu.planner import build_plan


class LabGuest(Protocol):
    """A simulated guest standing for one VM: an sshd at the VM's IP."""

    @property
    def vm(self) -> str: ...

    @property
    def address(self) -> str: ...

    @property
    def hardware(self) -> str: ...  # what its simulated nvidia-smi shows


@runtime_checkable
class SimulatedLab(Protocol):
    """A simulated lab behind the inventory (`vgpu sim up`'s), as the commands see it:
    what it simulates, how its guests run the harness, and its guests following the VMs
    that apply makes and destroy removes. Every plan given is the Site's plan of the
    scenario on this lab's inventory."""

    @property
    def description(self) -> str: ...  # what is simulated, stored with every result

    @property
    def guests_missing(self) -> str | None: ...  # what this machine lacks for guests

    @property
    def docker_host(self) -> str | None: ...  # the lab's real Docker daemon, if it has one

    @property
    def base_image(self) -> str: ...  # the base the guests' harness image is built FROM

    def guest_runtime(self) -> HarnessRuntime: ...

    def runtime_note(self) -> str: ...

    def on_guests(self, scenario: Scenario) -> Scenario: ...

    def harness_site_dirs(self) -> tuple[str, ...]: ...

    def scenario_guests(self, plan: Plan) -> list[LabGuest]: ...

    def start_for_apply(self, plan: Plan) -> list[LabGuest]: ...

    def stop_for_destroy(self, plan: Plan) -> list[LabGuest]: ...

    def upgrade_host(self, host: str, esxi_build: str | None, vib_version: str | None,
                     faults: dict[str, float]) -> str: ...
    # One drained host upgraded in place and rebooted; ``faults``: drop_vib,
    # unload_module (1.0: on), slowdown (a share). The simulator's answer.


@dataclass
class Site:
    """The inventory a command works on (None: this machine alone), how it was found, and
    the simulated lab behind it; plans are made once per scenario and kept."""

    inventory_path: Path | None = None
    inventory: Inventory | None = None
    how: str | None = None  # how the inventory was found (catalog.InventoryChoice.how)
    lab: SimulatedLab | None = None
    _plans: list[tuple[Scenario, str | None, Plan]] = field(default_factory=list, repr=False)

    @property
    def found_by_default(self) -> bool:
        """Found in the current folder or the user's default, not named by the person."""
        return self.how in catalog.FOUND_BY_DEFAULT

    def plan(self, scenario: Scenario, pin_host: str | None = None) -> Plan:
        """The scenario's plan on this inventory (every VM on ``pin_host`` when given),
        computed the first time it is asked."""
        for known, host, plan in self._plans:
            if host == pin_host and (known is scenario or known == scenario):
                return plan
        plan = build_plan(scenario, self.inventory, inventory_name=(
            str(self.inventory_path) if self.inventory_path is not None else None),
            pin_host=pin_host)
        self._plans.append((scenario, pin_host, plan))
        return plan

    def require(self, why: str, fix: str) -> tuple[Inventory, Path]:
        """The inventory and its path, or an input error saying ``why`` one is needed."""
        if self.inventory is None or self.inventory_path is None:
            raise InputError.single("command line", "--inventory", why, fix=fix)
        return self.inventory, self.inventory_path


def open_site(inventory: Path | None, how: str = "--inventory") -> Site:
    """The Site of an inventory path (or the name of one shipped in inventory/): found,
    loaded and checked here once; its simulated lab plugged in when it is the inventory of
    the running `vgpu sim up` lab."""
    if inventory is None:
        return Site()
    path = catalog.resolve_inventory(inventory)
    loaded = load_inventory(path)
    from vgpu.sim.follow import lab_for  # the one seam to the simulator

    return Site(inventory_path=path, inventory=loaded, how=how, lab=lab_for(path))


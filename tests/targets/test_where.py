"""Where a scenario runs, decided by the targets layer from the command's Site: this
machine, an inventory's hosts, or a simulator lab's guests; and how the harness runs
there (runtime, image, whether the CPU may stand in for a planned GPU)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from vgpu import catalog
from vgpu.errors import InputError
from vgpu.model.load import load_inventory
from vgpu.model.plan import Plan
from vgpu.site import Site
from vgpu.targets.placements import scenario_placements
from vgpu.targets.where import HarnessChoice, RunsOn, harness_choice, runs_on

INVENTORIES = catalog.default_inventory_dir()
SIM = INVENTORIES / "sim.yaml"
LAB = INVENTORIES / "lab.example.yaml"
ASKED = HarnessChoice(runtime=None, image=None, base_image="ubuntu:22.04", docker_host=None,
                      allow_cpu=False)


@dataclass(frozen=True)
class Guest:
    vm: str
    address: str = "127.0.0.11"
    hardware: str = "A100-80GB"


@dataclass
class FakeLab:
    """What the decisions read of a simulator lab; the guests it has, by VM name."""

    guests: list[str] = field(default_factory=list)
    runtime: str = "container"
    docker_host: str | None = None
    base_image: str = "ubuntu:22.04-sim"
    description: str = "vcsim + simulated guests"
    asked_for: list[Plan] = field(default_factory=list)

    def guest_runtime(self) -> str:
        return self.runtime

    def scenario_guests(self, plan: Plan) -> list[Guest]:
        self.asked_for.append(plan)
        return [Guest(vm.name) for vm in plan.vms if vm.name in self.guests]


def _site(path: Path, how: str = "--inventory", lab: FakeLab | None = None) -> Site:
    return Site(inventory_path=path, inventory=load_inventory(path), how=how,
                lab=lab)  # type: ignore[arg-type]


def test_without_an_inventory_a_scenario_runs_here_and_nothing_is_said() -> None:
    site = Site()
    where = runs_on(catalog.load("6"), site)
    assert where == RunsOn(site) and where.here and where.said is None
    assert harness_choice(site, where, ASKED) == ASKED


def test_a_vcenter_scenario_runs_on_the_inventorys_vms() -> None:
    site = _site(LAB)
    where = runs_on(catalog.load("6"), site)
    assert where.site is site and not where.here and where.said is None
    assert harness_choice(site, where, ASKED) == ASKED  # the planned GPUs are measured


def test_a_bare_metal_scenario_stays_here_when_a_found_inventory_lists_no_bare_metal() -> None:
    found = _site(SIM, how=catalog.FOUND_HERE)
    where = runs_on(catalog.load("bm6"), found)
    assert where.here and where.site is not found
    assert where.said == ("running on this machine: scenario bm6 is bare metal and "
                          f"{SIM} lists no bare-metal hosts (pass --inventory to run on "
                          "other hosts)")
    named = _site(SIM)  # named by the person: the run goes where it says, and fails there
    assert runs_on(catalog.load("bm6"), named) == RunsOn(named)


def test_a_bare_metal_scenario_runs_on_the_inventorys_bare_metal_hosts() -> None:
    site = _site(LAB, how=catalog.FOUND_HERE)
    assert runs_on(catalog.load("bm6"), site) == RunsOn(site)


def test_a_simulator_labs_scenario_runs_on_its_guests_on_the_cpu() -> None:
    lab = FakeLab(guests=["s6-4g", "s6-2g"], runtime="host")
    site = _site(SIM, lab=lab)
    where = runs_on(catalog.load("6"), site)
    assert where.site is site
    assert where.said is not None and where.said.startswith(
        "running on the simulator lab's VMs: s6-4g, s6-2g (simulated guests: each harness "
        "instance in its venv on the CPU")
    assert lab.asked_for == [site.plan(catalog.load("6"))]  # the Site's own plan
    chosen = harness_choice(site, where, ASKED)
    assert (chosen.runtime, chosen.allow_cpu, chosen.said) == ("host", True, None)
    named = harness_choice(site, where, HarnessChoice("container", None, "b", None, False))
    assert (named.runtime, named.allow_cpu) == ("container", False)  # as the person said


def test_a_simulator_lab_without_the_scenarios_vms_runs_here_beside_its_image() -> None:
    lab = FakeLab(docker_host="unix:///tmp/sim-docker.sock")
    found = _site(SIM, how=catalog.FOUND_USER_DEFAULT, lab=lab)
    where = runs_on(catalog.load("6"), found)
    assert where.here
    assert where.said == (f"running on this machine: the simulator lab in {SIM} has no VMs "
                          "of scenario 6 (`vgpu apply --scenario 6 --yes` makes them)")
    chosen = harness_choice(found, where, ASKED)
    assert chosen.runtime == "container" and not chosen.allow_cpu
    assert (chosen.base_image, chosen.docker_host) == (lab.base_image, lab.docker_host)
    assert chosen.image is not None and chosen.said is not None
    own_image = harness_choice(found, where, HarnessChoice(None, "mine:1", "b", None, False))
    assert own_image.runtime is None and own_image.image == "mine:1"
    named = _site(SIM, lab=FakeLab())  # named and without VMs: refused later, not moved
    assert runs_on(catalog.load("6"), named) == RunsOn(named)


def test_a_training_scenario_is_placed_as_an_inference_one() -> None:
    sc = catalog.load("train_multinode_2")
    planned = [vm.name for vm in _site(SIM).plan(sc).vms]
    assert len(planned) == 2
    lab = FakeLab(guests=planned, runtime="host")
    site = _site(SIM, lab=lab)
    where = runs_on(sc, site)
    assert where.site is site
    assert where.said is not None and f"VMs: {', '.join(planned)} " in where.said
    assert harness_choice(site, where, ASKED).allow_cpu  # torch decides on the nodes
    bare_metal = _site(LAB)
    assert runs_on(catalog.load("train_bm_2"), bare_metal) == RunsOn(bare_metal)


@pytest.mark.parametrize("scenario", ["6", "bm6", "train_multinode_2"])
def test_placements_without_an_inventory_are_an_input_error_naming_the_fix(
        scenario: str) -> None:
    with pytest.raises(InputError) as refused:
        scenario_placements(catalog.load(scenario), Site())
    assert refused.value.exit_code == 2
    text = str(refused.value)
    assert "--inventory" in text and f"scenario {scenario} runs on an inventory's hosts" in text
    assert "pass --inventory FILE" in text

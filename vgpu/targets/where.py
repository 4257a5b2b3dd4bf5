"""Where a command's scenario runs, decided once from its Site: the inventory's hosts, a
simulator lab's guests, or this machine (an empty Site); and how the harness runs there
(its runtime, and whether a planned GPU may be stood in for by the CPU). Nothing is
printed here: each decision carries the line the command says about it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from vgpu.model.scenario import Scenario
from vgpu.site import Site


@dataclass(frozen=True)
class RunsOn:
    """The site a run uses (an empty one: this machine) and the line that says why, when
    it is not the site the command was given."""

    site: Site
    said: str | None = None

    @property
    def here(self) -> bool:
        return self.site.inventory is None


def runs_on(scenario: Scenario, site: Site) -> RunsOn:
    """A found (not named) inventory never sends a scenario to hosts it does not describe.
    A simulator lab's scenario runs on its guests when `vgpu apply` made them, else here;
    a bare-metal scenario runs here unless the inventory lists bare-metal hosts."""
    if site.inventory is None or site.inventory_path is None:
        return RunsOn(site)
    shown = _shown(site.inventory_path)
    if scenario.platform == "bare-metal":
        if site.found_by_default and not site.inventory.bare_metal:
            return RunsOn(Site(), f"running on this machine: scenario {scenario.id} is bare "
                          f"metal and {shown} lists no bare-metal hosts (pass --inventory "
                          "to run on other hosts)")
        return RunsOn(site)
    if site.lab is None:
        return RunsOn(site)
    guests = site.lab.scenario_guests(site.plan(scenario))
    if guests:
        how = ("in its own container" if site.lab.guest_runtime() == "container"
               else "in its venv")
        return RunsOn(site, f"running on the simulator lab's VMs: "
                      f"{', '.join(g.vm for g in guests)} (simulated guests: each harness "
                      f"instance {how} on the CPU, a functional check)")
    if site.found_by_default:
        return RunsOn(Site(), f"running on this machine: the simulator lab in {shown} has "
                      f"no VMs of scenario {scenario.id} (`vgpu apply --scenario "
                      f"{scenario.id} --yes` makes them)")
    return RunsOn(site)


def _shown(path: Path) -> str:
    return str(path) if path.is_absolute() or str(path).startswith(".") else f"./{path}"


@dataclass(frozen=True)
class HarnessChoice:
    """How the harness runs on the targets: ``runtime`` None lets the targets decide
    (container where the scenario asks for one); ``allow_cpu`` runs an instance whose
    planned GPU the harness cannot use on the CPU instead of failing it."""

    runtime: str | None  # as asked (checked where the runtime options are made)
    image: str | None
    base_image: str
    docker_host: str | None
    allow_cpu: bool
    said: str | None = None


def harness_choice(site: Site, where: RunsOn, asked: HarnessChoice) -> HarnessChoice:
    """What was asked, unless a simulator lab decides: its guests run the harness as the
    lab built them (their runtime, on the CPU: a functional check); a run on this machine
    beside a lab with a Docker daemon (its bare-metal reference) uses the guests' harness
    image in that daemon, so both sides run the same harness, ONNX Runtime and container
    runtime. A runtime the person named is kept."""
    from vgpu.container.images import default_tag

    if asked.runtime is not None:
        return asked
    if where.site.lab is not None:
        return replace(asked, runtime=where.site.lab.guest_runtime(), allow_cpu=True)
    lab = site.lab
    if (not where.here or lab is None or lab.docker_host is None
            or asked.docker_host is not None or asked.image is not None):
        return asked
    return replace(asked, runtime="container", image=default_tag(),
                   base_image=lab.base_image, docker_host=lab.docker_host,
                   said="on this machine in containers of the simulator lab's harness "
                   "image (its Docker daemon), as on the lab's guests")

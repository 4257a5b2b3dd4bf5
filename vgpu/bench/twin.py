"""Whether `vgpu bench` runs a scenario's bare-metal twin first, so the run ends in a
verdict: the twin (the scenario its ``baseline.scenario`` names) runs on the same targets
and settings when the store holds no ok series of it for a chosen workload."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from vgpu import catalog
from vgpu.errors import InputError
from vgpu.model.inventory import Inventory
from vgpu.model.scenario import Scenario
from vgpu.results.store.result_store import ResultStore


@dataclass(frozen=True)
class TwinPlan:
    """The twin to run first (None: none) and which of its workloads; ``note`` says what
    was decided and why, for the console."""

    scenario: Scenario | None
    workloads: list[str] = field(default_factory=list)
    note: str | None = None


def baseline_scenario(scenario: Scenario) -> Scenario:
    """The scenario ``baseline.scenario`` names, loaded from the catalogue."""
    if scenario.baseline is None or scenario.baseline.scenario is None:
        raise InputError.single(scenario.source or f"scenario {scenario.id}",
                                "baseline.scenario",
                                "--with-baseline needs a baseline scenario",
                                fix="set baseline: {scenario: ID} in the scenario file")
    try:
        return catalog.load(scenario.baseline.scenario)
    except InputError as exc:
        if not any(p.file == "--scenario" for p in exc.problems):
            raise  # the baseline file itself is broken: its own problems name it
        raise InputError.single(scenario.source or f"scenario {scenario.id}",
                                "baseline.scenario",
                                f"no scenario with id '{scenario.baseline.scenario}'",
                                fix=exc.problems[0].fix) from None


def plan_twin(
    scenario: Scenario, workloads: Mapping[str, str], store: ResultStore, *,
    force: bool, skip: bool, inventory: Inventory | None = None,
) -> TwinPlan:
    """``workloads`` maps each chosen workload label to the key its series is stored
    under on these targets (model variant, precision, backend included). ``force``
    (--with-baseline): always run the twin's chosen workloads. ``skip`` (--no-baseline):
    never. Otherwise run it for the chosen workloads the store has no ok series of under
    the same key, when the scenario names a twin scenario (not a named baseline) and the
    targets can run it."""
    if skip:
        return TwinPlan(None)
    if force:
        return TwinPlan(baseline_scenario(scenario), list(workloads),
                        "--with-baseline: running the baseline scenario first")
    baseline = scenario.baseline
    if baseline is None or baseline.scenario is None or baseline.reference_run:
        return TwinPlan(None)
    twin = baseline_scenario(scenario)
    twin_labels = {w.label for w in twin.workloads}
    missing = [label for label, key in workloads.items() if label in twin_labels
               and store.latest_series(scenario_id=twin.id, workload=key) is None]
    if not missing:
        return TwinPlan(None)
    where = _unreachable(twin, inventory)
    if where is not None:
        return TwinPlan(None, note=f"no stored run of scenario {twin.id} to judge against, "
                                   f"and {where}: no verdict this time")
    return TwinPlan(twin, missing,
                    f"No stored run of scenario {twin.id} ({twin.name}) for "
                    f"{', '.join(missing)}: running it on the same targets in this command so "
                    "this run ends in a verdict (--no-baseline skips it)")


def _unreachable(twin: Scenario, inventory: Inventory | None) -> str | None:
    """Why the twin cannot run on the targets of this inventory, or None."""
    if inventory is None or twin.platform != "bare-metal":
        return None
    if inventory.bare_metal or inventory.is_local:
        return None
    return ("the inventory has no bare-metal hosts to run it on (add bare_metal: "
            "entries, or run it elsewhere into the same --db)")

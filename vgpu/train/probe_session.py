"""`vgpu train probe --scenario`: the allreduce probe over the scenario's nodes from an
inventory (or ranks on this machine), repeated into one stored series."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

from vgpu.model.scenario import Scenario
from vgpu.results.store.records import TargetKind
from vgpu.results.store.result_store import ResultStore
from vgpu.site import Site
from vgpu.train.launch import TrainNode
from vgpu.train.probe import ProbeRun, ProbeSettings, run_probe
from vgpu.train.scenario_runner import local_node
from vgpu.train.session import close_nodes, site_nodes


def probe_series(
    scenario: Scenario, nodes: list[TrainNode] | None, store: ResultStore,
    settings: ProbeSettings, repeats: int, target_kind: TargetKind,
) -> list[ProbeRun]:
    """``repeats`` probes stored as one series (a verdict needs two or more)."""
    series = uuid.uuid4().hex[:12]
    out_root = store.logs_root / "probe" / scenario.id / series
    runs = []
    for repeat in range(repeats):
        out = out_root / f"repeat{repeat}"
        local = None if nodes is not None else local_node(out / "node", python=sys.executable)
        runs.append(run_probe(scenario, nodes, out, local_node=local, store=store,
                              target_kind=target_kind, settings=settings, series_id=series,
                              check_nodes=repeat == 0))
    return runs


def probe_and_store(
    scenario: Scenario, site: Site, db: Path, settings: ProbeSettings,
    repeats: int,
) -> list[ProbeRun]:
    with ResultStore.open(db) as store:
        nodes: list[TrainNode] | None = None
        target_kind: TargetKind = "local"
        if site.inventory is not None:
            nodes, target_kind, _notes = site_nodes(scenario, site, store)
        try:
            return probe_series(scenario, nodes, store, settings, repeats, target_kind)
        finally:
            close_nodes(nodes or [])

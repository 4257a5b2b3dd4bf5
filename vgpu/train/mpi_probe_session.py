"""`vgpu train mpi-probe --scenario`: the MPI probe over the scenario's nodes from an
inventory (or ranks on this machine), repeated into one stored series."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

from vgpu.model.scenario import Scenario
from vgpu.results.records import TargetKind
from vgpu.results.store import ResultStore
from vgpu.site import Site
from vgpu.train.launch import TrainNode
from vgpu.train.mpi_probe import MpiProbeSettings, run_mpi_probe
from vgpu.train.probe import ProbeRun
from vgpu.train.scenario_runner import local_node
from vgpu.train.session import close_nodes, site_nodes


def mpi_probe_and_store(scenario: Scenario, site: Site, db: Path, settings: MpiProbeSettings,
                        repeats: int) -> list[ProbeRun]:
    with ResultStore.open(db) as store:
        nodes: list[TrainNode] | None = None
        target_kind: TargetKind = "local"
        if site.inventory is not None:
            nodes, target_kind, _notes = site_nodes(scenario, site, store)
        series = uuid.uuid4().hex[:12]
        out_root = store.logs_root / "mpi-probe" / scenario.id / series
        try:
            runs = []
            for repeat in range(repeats):
                out = out_root / f"repeat{repeat}"
                local = None if nodes is not None else local_node(out / "node",
                                                                   python=sys.executable)
                runs.append(run_mpi_probe(scenario, nodes, out, local_node=local, store=store,
                                          target_kind=target_kind, settings=settings,
                                          series_id=series))
            return runs
        finally:
            close_nodes(nodes or [])

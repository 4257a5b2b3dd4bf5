"""`vgpu train mpi-probe --scenario`: the MPI probe over the scenario's nodes from an
inventory (or ranks on this machine), repeated into one stored series and judged against
its scenario's baseline (a VM scenario's bare-metal twin) like any series."""

from __future__ import annotations

import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

from vgpu.model.scenario import Scenario
from vgpu.results.store.records import TargetKind
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import load_series
from vgpu.results.verdict.compare import Comparison
from vgpu.results.verdict.judge import judge_against_baseline
from vgpu.site import Site
from vgpu.train.launch import TrainNode
from vgpu.train.mpi_probe import MpiProbeSettings, run_mpi_probe
from vgpu.train.probe import ProbeRun
from vgpu.train.scenario_runner import local_node
from vgpu.train.session import close_nodes, site_nodes


@dataclass(frozen=True)
class MpiProbeSeries:
    """The probes of one `vgpu train mpi-probe`, their verdict against the scenario's
    baseline (None: nothing to judge against) and which baseline, or why there is none."""

    runs: list[ProbeRun]
    comparison: Comparison | None
    baseline_note: str


def judge_probe_series(store: ResultStore, scenario: Scenario,
                       series_id: str) -> tuple[Comparison | None, str]:
    """The stored probe series judged as `vgpu bench` judges a series: against the newest
    `mpi-probe` series of the scenario's baseline (a VM scenario's bare-metal twin: kind
    vm-vs-bare-metal) with the scenario's throughput band on its busbw (peak, average,
    share of the link); the reference is stored with the series, so `vgpu report` shows
    the same verdict."""
    return judge_against_baseline(store, scenario, load_series(store, series_id),
                                  run_command="vgpu train mpi-probe")


def mpi_probe_and_store(scenario: Scenario, site: Site, db: Path, settings: MpiProbeSettings,
                        repeats: int) -> MpiProbeSeries:
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
            comparison, note = judge_probe_series(store, scenario, series)
            return MpiProbeSeries(runs, comparison, note)
        finally:
            close_nodes(nodes or [])

"""Which series judges which (vgpu.results.verdict.referee): chosen when a series runs, stored
with it, and read back by every later verdict; the kind follows the twin relation."""

from __future__ import annotations

from collections.abc import Callable

from tests.results.series import QUIET
from vgpu import catalog
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import SYSTEM_THROUGHPUT, WORST_P99, SeriesData, load_series
from vgpu.results.store.series import series_of_run as series_of
from vgpu.results.verdict.judge import judge_against_baseline, judge_stored, judged_as_one_family
from vgpu.results.verdict.noise_store import class_key
from vgpu.results.verdict.referee import against_named_baseline, gain_reference, kind_between
from vgpu.results.views.report import Table, build_report, scenario_gain_table
from vgpu.revalidate.flow import against_bare_metal_as_one_family
from vgpu.revalidate.verdicts import WorkloadVerdict, exit_code

AddSeries = Callable[..., list[int]]
SIX = [{"4g": 500.0 + d, "2g": 300.0, "1g": 200.0} for d in (0.0, 1.0, -1.0)]


def _series(store: ResultStore, run_ids: list[int]) -> SeriesData:
    return load_series(store, series_of(store, run_ids[0]))


def _quiet(store: ResultStore, data: SeriesData) -> None:
    """A calibrated, quiet series level for throughput and latency alike (each metric has
    its own)."""
    for metric in (SYSTEM_THROUGHPUT, WORST_P99):
        store.save_noise(class_key(data), metric, QUIET, [], {})


def test_a_local_run_against_its_bare_metal_twin_is_judged_on_latency_too(
    store: ResultStore, add_series: AddSeries
) -> None:
    add_series(SIX, scenario_id="bm6", target_kind="bare-metal", loadgen_scenario="Server",
               p99_ms=5.0)
    local = _series(store, add_series(SIX, scenario_id="6", target_kind="local",
                                      loadgen_scenario="Server", p99_ms=5.5))
    _quiet(store, local)
    comparison, note = judge_against_baseline(store, catalog.load("6"), local)
    assert note == "scenario bm6"
    assert comparison is not None and comparison.kind == "vm-vs-bare-metal"
    checks = {c.metric: c for c in comparison.checks}
    # Server: the samples/s is the offered rate; whether the rate was held is judged
    assert SYSTEM_THROUGHPUT not in checks
    assert checks["valid_at_offered_rate"].verdict == "PASS"
    # 10% above bare metal's worst p99, where scenario 6 allows 5% (latency_pct)
    assert checks[WORST_P99].band.upper_pct == 5.0
    assert checks[WORST_P99].verdict == "FAIL" and comparison.verdict == "FAIL"
    stored = store.series_reference(local.series_id)
    assert stored is not None and (stored.relation, stored.kind) == ("twin", "vm-vs-bare-metal")


def test_later_verdicts_use_the_stored_reference_not_the_newest_series(
    store: ResultStore, add_series: AddSeries
) -> None:
    first_twin = _series(store, add_series(SIX, scenario_id="bm6", target_kind="bare-metal"))
    vm = _series(store, add_series(SIX, scenario_id="6"))
    _quiet(store, vm)
    at_bench, _ = judge_against_baseline(store, catalog.load("6"), vm)
    # a newer, much faster bare-metal series of the same scenario arrives later
    add_series([{k: v * 1.5 for k, v in r.items()} for r in SIX], scenario_id="bm6",
               target_kind="bare-metal")
    later = judge_stored(store, vm, tolerance=0.5)  # the report's band: not used
    assert later.reference is not None
    assert later.reference.reference_series == first_twin.series_id
    assert later.comparison == at_bench and at_bench is not None
    assert at_bench.verdict == "PASS"


def test_a_series_that_stored_no_reference_meets_the_bare_metal_series_of_its_scenario(
    store: ResultStore, add_series: AddSeries
) -> None:
    bare_metal = _series(store, add_series(SIX, target_kind="bare-metal"))
    vm = _series(store, add_series(SIX))
    local = _series(store, add_series(SIX, target_kind="local"))
    verdict = judge_stored(store, vm, tolerance=0.03)
    assert verdict.reference is not None and verdict.comparison is not None
    assert verdict.reference.reference_series == bare_metal.series_id
    assert verdict.comparison.kind == "vm-vs-bare-metal"
    assert verdict.comparison.checks[0].band.lower_pct == -3.0
    assert judge_stored(store, local).comparison is None  # no twin relation stored


def test_compare_takes_the_kind_the_candidate_stored_for_that_reference(
    store: ResultStore, add_series: AddSeries
) -> None:
    twin = _series(store, add_series(SIX, scenario_id="bm6", target_kind="bare-metal"))
    local = _series(store, add_series(SIX, scenario_id="6", target_kind="local"))
    other = _series(store, add_series(SIX, scenario_id="1", target_kind="bare-metal"))
    judge_against_baseline(store, catalog.load("6"), local)
    assert kind_between(store, local, twin) == "vm-vs-bare-metal"
    assert kind_between(store, local, other) == "scenario-vs-scenario"


def test_one_command_judges_its_workloads_as_one_family_and_the_report_follows(
    store: ResultStore, add_series: AddSeries
) -> None:
    bm = [{"a": v} for v in (1000.0, 1010.0, 990.0)]
    judged = []
    # 4.5% below bare metal (band 2%): p = 0.018, a FAIL alone; the other 4% above
    for workload, factor in (("w1 Offline", 0.955), ("w2 Offline", 1.04)):
        add_series(bm, scenario_id="bm6", target_kind="bare-metal", workload=workload)
        vm = _series(store, add_series([{"a": r["a"] * factor} for r in reversed(bm)],
                                       workload=workload))
        _quiet(store, vm)
        comparison, _ = judge_against_baseline(store, catalog.load("6"), vm)
        assert comparison is not None
        judged.append((vm, comparison))
    assert [c.verdict for _, c in judged] == ["FAIL", "PASS"]
    family = judged_as_one_family(store, [(vm.series_id, c) for vm, c in judged])
    # two workloads in one family: each FAIL must hold at its share, 2.5% / 2
    assert [c.verdict for c in family] == ["INCONCLUSIVE", "PASS"]
    assert "not at its workload's share of the command's 2.5% (split over the 2 workloads" \
        in family[0].checks[0].reason
    verdicts = build_report(store).sections[0][1]
    assert isinstance(verdicts, Table)
    assert {row[1]: row[9] for row in verdicts.rows} == {"w1 Offline": "INCONCLUSIVE",
                                                         "w2 Offline": "PASS"}
    # judged again later (`vgpu revalidate`): the family the command stored stays
    again, _ = judge_against_baseline(store, catalog.load("6"), judged[0][0])
    assert again is not None and again.verdict == "INCONCLUSIVE"


def test_a_revalidation_judges_every_scenario_against_bare_metal_as_one_family(
    store: ResultStore, add_series: AddSeries
) -> None:
    bm = [{"a": v} for v in (1000.0, 1010.0, 990.0)]
    verdicts = []
    # one workload in each of two scenarios, each benched (and judged) on its own
    for scenario, factor in (("6", 0.955), ("1", 1.04)):
        sc = catalog.load(scenario)
        assert sc.baseline is not None and sc.baseline.scenario is not None
        add_series(bm, scenario_id=sc.baseline.scenario, target_kind="bare-metal")
        vm = _series(store, add_series([{"a": r["a"] * factor} for r in reversed(bm)],
                                       scenario_id=scenario))
        _quiet(store, vm)
        comparison, _ = judge_against_baseline(store, sc, vm)
        verdicts.append(WorkloadVerdict(scenario, "w", vm.series_id, comparison, None))
    assert [v.verdict for v in verdicts] == ["FAIL", "PASS"]
    assert exit_code(verdicts, {}) == 3
    family = against_bare_metal_as_one_family(store, verdicts)
    assert [v.verdict for v in family] == ["INCONCLUSIVE", "PASS"]
    assert exit_code(family, {}) == 4  # undecided: no pass for a gate
    table = build_report(store).sections[0][1]
    assert isinstance(table, Table)
    assert {row[0]: row[9] for row in table.rows} == {"6": "INCONCLUSIVE", "1": "PASS"}


def test_a_named_baseline_is_run_vs_baseline_with_the_scenarios_tolerances(
    store: ResultStore, add_series: AddSeries
) -> None:
    before = add_series(SIX)
    after = _series(store, add_series(SIX))
    store.set_baseline(before[0], "pre:6:w")
    named = store.baseline("pre:6:w")
    assert named is not None
    chosen = against_named_baseline(catalog.load("6"), after, named)
    tolerances = catalog.load("6").tolerances
    assert (chosen.series_id, chosen.reference_series) == (
        after.series_id, _series(store, before).series_id)
    assert (chosen.relation, chosen.kind) == ("named-baseline", "run-vs-baseline")
    assert chosen.tolerance == tolerances.throughput_pct / 100.0
    assert chosen.tolerances[WORST_P99] == tolerances.latency_pct / 100.0


def test_the_gain_reference_is_scenario_1_of_the_same_workload_and_target(
    store: ResultStore, add_series: AddSeries
) -> None:
    one = _series(store, add_series(SIX, scenario_id="1"))
    other = _series(store, add_series(SIX, scenario_id="1", workload="bert/tiny Offline"))
    six = _series(store, add_series(SIX, scenario_id="6"))
    bare = _series(store, add_series(SIX, scenario_id="6", target_kind="bare-metal"))
    latest = {(d.scenario_id, d.workload, d.target_kind): d for d in (one, other, six, bare)}
    assert gain_reference(six, latest) is one
    assert gain_reference(one, latest) is None  # scenario 1 is no gain of its own
    assert gain_reference(bare, latest) is None  # no scenario 1 on bare metal
    table = scenario_gain_table([one, other, six, bare])
    assert table.headers[4] == "scenario 1 samples/s"
    [row] = table.rows
    assert row[:3] == ["6", six.workload, "vm"] and row[5] == "+0.00%"

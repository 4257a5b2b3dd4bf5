"""A series is the set of repeats of one workload from one `vgpu bench` invocation (or
one producer's batch of runs). This module turns stored runs into per-repeat samples:
the numbers that statistics, compare and report work on."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import NamedTuple

from vgpu.errors import InputError
from vgpu.results.stats.intervals import summarize, system_totals
from vgpu.results.store.disturbance import DISTURBANCE_METRICS, Disturbance, disturbance
from vgpu.results.store.records import LATENCY_PERCENTILES, Run, StoredInstance, WorkloadIdentity
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.tokens import FIXED_RATE_SCENARIOS

SYSTEM_THROUGHPUT = "system_throughput"
WORST_P99 = "latency_p99_worst"
TRAINING_THROUGHPUT = "throughput"  # a training run's total images/s (run-level metric)
# Run metrics that describe how a measurement was taken, not what it measured: kept out of
# the samples, so no comparison judges them.
TIMED_OVERLAP = "timed_overlap"  # share of the timed span with every instance running
RUN_QUALITY_METRICS = frozenset({TIMED_OVERLAP, *DISTURBANCE_METRICS})
_LOWER_IS_BETTER_WORDS = ("latency", "time", "duration", "seconds")
# How a run set aside in an interleaved session says why (vgpu.bench.setaside): a
# disturbance seen on both sides of its block, or on one side only (those runs count
# again in the check that a PASS holds with them)
SET_ASIDE = "set aside: "
BOTH_SIDES_SET_ASIDE = "set aside: both sides disturbed: "
ONE_SIDED_SET_ASIDE = "set aside: one side disturbed: "


@dataclass(frozen=True)
class Sample:
    """One metric over the repeats of a series."""

    name: str
    values: list[float]
    unit: str
    higher_is_better: bool


class InvalidRepeat(NamedTuple):
    """An instance LoadGen judged INVALID in a repeat, and LoadGen's reasons."""

    run_id: int
    instance: str
    reasons: list[str]


@dataclass
class SeriesData:
    series_id: str
    scenario_id: str
    scenario_name: str
    workload: str
    target_kind: str
    kind: str
    loadgen_scenario: str | None
    runs: list[Run]
    instances: dict[int, list[StoredInstance]]
    per_instance_throughput: dict[str, list[float]] = field(default_factory=dict)
    samples: dict[str, Sample] = field(default_factory=dict)
    # Repeats whose every instance LoadGen found VALID: the only ones in the samples.
    valid_run_ids: list[int] = field(default_factory=list)
    invalid_runs: list[InvalidRepeat] = field(default_factory=list)
    # runs other load on the machine disturbed (vgpu.results.store.disturbance): shown with the
    # series' numbers, and no comparison with them can PASS or FAIL
    disturbed_runs: list[Disturbance] = field(default_factory=list)
    repeats_asked: int = 0
    min_valid: int = 0
    # RUN_QUALITY_METRICS of every ok run (valid or not), in run order
    run_quality: dict[str, list[float]] = field(default_factory=dict)
    # the series with the runs set aside for a disturbance on one side of their block
    # counted again (None: none were): their share and slowdown set the allowance a PASS
    # must hold with (vgpu.results.verdict.allowance)
    with_set_aside: SeriesData | None = None

    @property
    def valid_count(self) -> int:
        return len(self.valid_run_ids)

    @property
    def valid_shortfall(self) -> str | None:
        """Why this series cannot support a PASS: fewer VALID repeats than its floor."""
        if self.valid_count >= self.min_valid:
            return None
        invalid = sorted({r.run_id for r in self.invalid_runs})
        which = f" (INVALID: run {', '.join(map(str, invalid))})" if invalid else ""
        return (f"{self.label}: {self.valid_count} valid of {self.repeats_asked} repeats, "
                f"at least {self.min_valid} needed{which}")

    @property
    def disturbances(self) -> list[str]:
        """What disturbed which run, for the verdict: ``scenario 6 ...: disturbed: other
        processes used 63% of the CPU during run 14``."""
        return [f"{self.label}: {d.describe()}" for d in self.disturbed_runs]

    @property
    def identity(self) -> WorkloadIdentity:
        """The workload's name and what ran, as its first run stored them."""
        return self.runs[0].identity if self.runs else WorkloadIdentity(self.workload)

    @property
    def throughput_cv(self) -> float | None:
        """Coefficient of variation (stdev/mean) of the headline over the valid repeats."""
        sample = self.samples.get(self.headline)
        return None if sample is None or len(sample.values) < 2 else \
            summarize(sample.values).relative_stdev

    @property
    def runtimes(self) -> list[str]:
        """Where the harness ran (container, host) as the instances' records say."""
        found = {inst.result.platform.runtime for stored in self.instances.values()
                 for inst in stored if inst.result.platform and inst.result.platform.runtime}
        return sorted(found)

    @property
    def label(self) -> str:
        where = ", ".join([self.target_kind, *self.runtimes])
        return f"scenario {self.scenario_id} {self.workload} [{where}]"

    @property
    def run_ids(self) -> list[int]:
        return [run.id for run in self.runs]

    @property
    def headline(self) -> str:
        """The sample that stands for the series' throughput: the training job's images/s,
        or the sum of the inference instances' samples/s."""
        return TRAINING_THROUGHPUT if self.kind == "training" else SYSTEM_THROUGHPUT

    @property
    def judged_metrics(self) -> list[str] | None:
        """What a comparison against another series judges: a training series its
        throughput (its other metrics describe the run), None for every shared sample."""
        return [TRAINING_THROUGHPUT] if self.kind == "training" else None

    @property
    def interleaved_with(self) -> str | None:
        """The series this one ran interleaved with, block by block (None: alone)."""
        design = self.runs[0].workload_detail.get("design") if self.runs else None
        return design.get("partner") if isinstance(design, dict) else None

    def _latest_design(self, key: str) -> object:
        """``key`` of the sequential design as the series' latest run that holds it stored
        it (vgpu.bench.pacing), else None."""
        for run in reversed(self.runs):
            design = run.workload_detail.get("design")
            if isinstance(design, dict) and design.get(key):
                return design[key]
        return None

    @property
    def looks(self) -> tuple[int, ...]:
        """The look totals of the group-sequential design the series ran, as its runs
        after the first look stored them (vgpu.bench.pacing); empty: a fixed sample."""
        looks = self._latest_design("looks")
        return () if looks is None else tuple(int(n) for n in str(looks).split(","))

    @property
    def looks_ended_at(self) -> int | None:
        """The total at which a budget that ran out made a look the design's last (None:
        the design ran as planned)."""
        ended = self._latest_design("ended_at")
        return None if ended is None else int(str(ended))

    @property
    def at_offered_rate(self) -> bool:
        """A Server or Interactive series: LoadGen offered a fixed rate, so its samples/s
        is that rate, not a finding (vgpu.results.verdict.offered_rate)."""
        return self.loadgen_scenario in FIXED_RATE_SCENARIOS

    @property
    def latency_matters(self) -> bool:
        return self.loadgen_scenario not in (None, "Offline")

    def latency_percentiles_ms(self) -> dict[str, dict[str, float]]:
        """Per instance, each latency percentile averaged over the repeats, in ms."""
        sums: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for run_id in self.valid_run_ids:
            for inst in self.instances[run_id]:
                for key in LATENCY_PERCENTILES:
                    if key in inst.result.latency_ns:
                        sums[inst.result.name][key].append(inst.result.latency_ns[key] / 1e6)
        return {
            name: {key: sum(v) / len(v) for key, v in per_key.items()}
            for name, per_key in sums.items()
        }


class Pairs(NamedTuple):
    """Two interleaved series' valid repeats that ran in the same block: positions into
    each side's valid repeats (and so into its samples), in block order (a block set
    aside and run again appears once per attempt, counted or not)."""

    candidate: list[int]
    reference: list[int]
    positions: list[tuple[int, int]]
    blocks: list[int]  # each position's block (its index in the session: its order)


def interleaved_pairs(candidate: SeriesData, reference: SeriesData) -> Pairs | None:
    """The blocks two series share when they ran interleaved with each other (vgpu bench
    with its twin, vgpu calibrate noise), else None. A block counts when both sides'
    repeats in it are VALID."""
    if candidate.interleaved_with != reference.series_id and \
            reference.interleaved_with != candidate.series_id:
        return None
    cand_blocks = _valid_blocks(candidate)
    ref_blocks = _valid_blocks(reference)
    shared = sorted(set(cand_blocks) & set(ref_blocks))
    return Pairs(list(range(len(cand_blocks))), list(range(len(ref_blocks))),
                 [(cand_blocks[b], ref_blocks[b]) for b in shared], [b for b, _ in shared])


def _valid_blocks(data: SeriesData) -> dict[tuple[int, int], int]:
    """(block: the run's repeat index, its attempt: 0 unless the block ran again) ->
    position among the series' valid repeats."""
    attempts: dict[int, int] = defaultdict(int)
    key: dict[int, tuple[int, int]] = {}
    for run in sorted(data.runs, key=lambda r: r.id):
        key[run.id] = (run.repeat_index, attempts[run.repeat_index])
        attempts[run.repeat_index] += 1
    return {key[run_id]: position for position, run_id in enumerate(data.valid_run_ids)}


def _higher_is_better(metric_name: str) -> bool:
    return not any(word in metric_name.lower() for word in _LOWER_IS_BETTER_WORDS)


def _invalid_instances(run_id: int, stored: list[StoredInstance]) -> list[InvalidRepeat]:
    return [InvalidRepeat(run_id, inst.result.name, list(inst.result.validity_reasons))
            for inst in stored if inst.result.validity == "INVALID"]


def _repeat_floor(runs: list[Run]) -> tuple[int, int]:
    """Repeats asked and the fewest VALID ones a verdict needs, as the series stored them
    (``repeats``, ``min_valid``) with its final total: a sequential series stores each
    run with the total planned when it began, so its pilot's runs say the pilot's count
    and its last runs the total it grew to; a series that says neither needs all its ok
    runs."""
    detail = max((run.workload_detail for run in runs),
                 key=lambda d: int(d.get("repeats") or 0))
    asked = max(int(detail.get("repeats") or 0), len(runs))
    floor = int(detail.get("min_valid") or asked)
    return asked, min(floor, asked)


def invalid_split(candidate: SeriesData, reference: SeriesData) -> str | None:
    """Why two series cannot support a PASS when LoadGen judged a different number of
    their runs INVALID: the runs that leave are not a random share (a Server run that
    missed its latency bound is a slow one; an Offline run that ended early a fast one),
    so runs leaving one side more than the other move the difference by themselves."""
    counts = [len({r.run_id for r in data.invalid_runs}) for data in (candidate, reference)]
    if counts[0] == counts[1]:
        return None
    sides = ", ".join(f"{count} of {len(data.runs)} runs of {data.label}"
                      for count, data in zip(counts, (candidate, reference), strict=True))
    return (f"INVALID runs split unevenly between the sides ({sides}): the runs that "
            "leave are not a random share of either side, so no PASS; an even split "
            "(or none) allows one")


def load_series(store: ResultStore, series_id: str,
                set_aside: bool = False) -> SeriesData:
    """Samples from the ok runs of ``series_id`` whose every instance LoadGen found VALID;
    failed/aborted repeats are skipped, INVALID ones listed in ``invalid_runs``; runs
    other load disturbed (vgpu.results.store.disturbance) listed in ``disturbed_runs``. With
    ``set_aside``, the runs set aside for a disturbance on one side count as ok runs;
    without it, ``with_set_aside`` holds that series when there are any."""
    runs = store.runs(series_id=series_id, status="ok")
    one_sided = [run for run in store.runs(series_id=series_id, status="aborted")
                 if (run.reason or "").startswith(ONE_SIDED_SET_ASIDE)]
    if set_aside:
        runs = sorted([*runs, *one_sided], key=lambda run: run.id)
    if not runs:
        raise InputError.single(
            str(store.path), "series", f"series {series_id} has no run that finished ok",
            fix="pick a run id from `vgpu results` whose status is ok",
        )
    first = runs[0]
    asked, floor = _repeat_floor(runs)
    data = SeriesData(
        series_id=series_id, scenario_id=first.scenario_id,
        scenario_name=first.scenario_name, workload=first.workload,
        target_kind=first.target_kind, kind=first.kind,
        loadgen_scenario=first.workload_detail.get("loadgen_scenario"),
        runs=runs, instances={run.id: store.instances(run.id) for run in runs},
        repeats_asked=asked, min_valid=floor,
    )
    for run in runs:
        invalid = _invalid_instances(run.id, data.instances[run.id])
        data.invalid_runs += invalid
        disturbed = disturbance(run.id, store.metrics(run.id))
        if disturbed is not None:
            data.disturbed_runs.append(disturbed)
        if not invalid:
            data.valid_run_ids.append(run.id)
    _add_instance_samples(data)
    _add_metric_samples(store, data)
    if one_sided and not set_aside:
        data.with_set_aside = load_series(store, series_id, set_aside=True)
    return data


def _add_instance_samples(data: SeriesData) -> None:
    """System throughput and worst p99 per valid repeat, from the instances' results."""
    per_instance: dict[str, list[float]] = defaultdict(list)
    worst_p99: list[float] = []
    for run_id in data.valid_run_ids:
        stored = data.instances[run_id]
        for inst in stored:
            if inst.result.throughput is not None:
                per_instance[inst.result.name].append(inst.result.throughput)
        p99s = [i.result.latency_ns["p99"] for i in stored if "p99" in i.result.latency_ns]
        if p99s:
            worst_p99.append(max(p99s) / 1e6)
    data.per_instance_throughput = dict(per_instance)
    if per_instance and len({len(v) for v in per_instance.values()}) == 1:
        data.samples[SYSTEM_THROUGHPUT] = Sample(
            SYSTEM_THROUGHPUT, system_totals(per_instance), "samples/s", True
        )
    if len(worst_p99) == data.valid_count and worst_p99:
        data.samples[WORST_P99] = Sample(WORST_P99, worst_p99, "ms", False)


def _add_metric_samples(store: ResultStore, data: SeriesData) -> None:
    """Run-level metrics (instance None) present in every valid repeat become samples too,
    except those that describe the measurement itself (RUN_QUALITY_METRICS)."""
    per_name: dict[str, list[float]] = defaultdict(list)
    quality: dict[str, list[float]] = defaultdict(list)
    units: dict[str, str] = {}
    for run in data.runs:
        for metric in store.metrics(run.id):
            if metric.instance is not None:
                continue
            if metric.name in RUN_QUALITY_METRICS:
                quality[metric.name].append(metric.value)
            elif run.id in data.valid_run_ids:
                per_name[metric.name].append(metric.value)
                units[metric.name] = metric.unit
    data.run_quality = dict(quality)
    for name, values in per_name.items():
        if len(values) == data.valid_count and name not in data.samples:
            data.samples[name] = Sample(name, values, units[name], _higher_is_better(name))


def series_of_run(store: ResultStore, run_id: int) -> str:
    run = store.run(run_id)
    if run is None:
        raise InputError.single(
            str(store.path), "RUN_ID", f"no run {run_id} in this database",
            fix="pick an id from `vgpu results`",
        )
    return run.series_id


def latest_series(store: ResultStore, per_workload: int = 0) -> tuple[list[SeriesData], int]:
    """The latest series of each scenario, workload and target, the latest
    ``per_workload`` of each workload, and every training series (a scaling study's
    points are series of one workload at several worker counts), in order of first run,
    loaded without loading the others; and how many series the store holds in all."""
    heads = store.series_heads()
    latest: dict[tuple[str, ...], str] = {}
    recent: dict[str, list[str]] = {}
    for series_id, scenario_id, workload, target_kind, kind in heads:
        key = (series_id,) if kind == "training" else (scenario_id, workload, target_kind)
        latest[key] = series_id
        recent.setdefault(workload, []).append(series_id)
    shown = set(latest.values()).union(
        *(ids[len(ids) - per_workload:] for ids in recent.values() if per_workload))
    return [load_series(store, series_id) for series_id, *_ in heads
            if series_id in shown], len(heads)


def all_series(store: ResultStore) -> list[SeriesData]:
    """Every series with at least one ok run, in order of first run."""
    seen: list[str] = []
    for run in store.runs(status="ok"):
        if run.series_id not in seen:
            seen.append(run.series_id)
    return [load_series(store, series_id) for series_id in seen]

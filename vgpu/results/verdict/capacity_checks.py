"""The LLM serving checks of a comparison between two stored series whose runs measured
capacity at the SLO (loadgen.llm.capacity_run): each instance position's searches, paired
repeat by repeat (block by block when the series ran interleaved), judged by the one rule
of vgpu.results.verdict.capacity (``judge_capacity``), its checks turned into the comparison's
checks. The capacity ratio carries its interval, so it joins the command's Holm family;
the matched-load checks are gates without one, like the accuracy gate.

Capacity here is where each search puts its knee (vgpu.results.verdict.capacity_system.knee):
its final point, the highest rate VALID, when it was VALID at least half the times it ran
there (a final point VALID once and INVALID on its rerun is at the knee, where a run is
VALID half the time), else its confirmed capacity; a search with no rate VALID at least
half the times it ran is not judged. The VALID gate's
load: bare metal's capacity less the allowed loss in each repeat; the VM's
search ran its own rates, so the VM's run there is, in this order: its run at that very
rate; else its highest INVALID run at or below it (INVALID where bare metal is VALID);
else its lowest VALID run above it (VALID under more load than bare metal's); else its
nearest run. The latency checks' load: a rate both searches ran below both knees
(``shared_load``). The rates used are stated."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from statistics import NormalDist
from typing import Any

from vgpu.results.stats.intervals import summarize, t_quantile
from vgpu.results.stats.tails import TailRatio, tail_ratio
from vgpu.results.store.series import SeriesData, interleaved_pairs
from vgpu.results.verdict import capacity_system as system
from vgpu.results.verdict.capacity import CapacityCheck, LlmVerdict, judge_capacity, search_bracket
from vgpu.results.verdict.capacity_system import Sharing, sharing
from vgpu.results.verdict.compare import Band, Check, Verdict

CAPACITY_CHECK = "capacity_at_slo"
FAIL_P = 0.025  # a FAIL alone, one-sided, as every check here
# fewest paired repeats for a capacity verdict: a t interval of their spread on 2 df at
# least (with 2 the hull of two repeats covers about half the time, with 1 never)
MIN_REPEATS = 3
# the VALID gate: a VM whose capacity is at the allowed line or above is VALID there at
# least half the time (the line is at or below its knee), so k INVALID runs of n have
# a chance of at most P(Binomial(n, 1/2) >= k) under non-inferiority
GATE_INVALID_SHARE = 0.5
SETUP_KEYS = ("seed", "slo_ms", "shape")
# the VALID gate's unit: its statistic is a z value of the INVALID count, no log percent
GATE_UNIT = "% of runs VALID"
# the latency checks compare a load at most this share of the lower capacity of a repeat
LATENCY_LOAD_SHARE = 0.8


def searches(series: SeriesData) -> list[list[Mapping[str, Any]]]:
    """Per valid repeat, each instance's stored search (in the run's instance order);
    empty when the series measured no capacity."""
    out = []
    for run_id in series.valid_run_ids:
        found = [inst.result.result.get("capacity") for inst in series.instances[run_id]]
        if not found or not all(isinstance(f, dict) for f in found):
            return []
        out.append(found)
    return out


def _paired(candidate: SeriesData, reference: SeriesData) -> list[tuple[int, int]]:
    pairs = interleaved_pairs(candidate, reference)
    if pairs is not None:
        return pairs.positions
    n = min(candidate.valid_count, reference.valid_count)
    return [(i, i) for i in range(n)]


def _confirmed(search: Mapping[str, Any]) -> float:
    """Where the search puts the capacity (vgpu.results.verdict.capacity_system.knee)."""
    return system.knee(search)


def _document(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The searches as judge_capacity reads them, each at its confirmed capacity."""
    first = runs[0]
    return {**{k: first.get(k) for k in SETUP_KEYS},
            "repeats": [{**r, "repeat": i, "capacity_qps": _confirmed(r), "confirmed": True}
                        for i, r in enumerate(runs)]}


def matched_run(vm: Mapping[str, Any], rate: float) -> Mapping[str, Any]:
    """The VM search's run that stands for the VM at ``rate`` (the module's order)."""
    runs = vm["runs"]
    exact = [r for r in runs if math.isclose(r["rate"], rate, rel_tol=1e-9)]
    if exact:
        return exact[-1]
    invalid_below = [r for r in runs if not r["valid"] and r["rate"] <= rate]
    if invalid_below:
        return max(invalid_below, key=lambda r: r["rate"])
    valid_above = [r for r in runs if r["valid"] and r["rate"] >= rate]
    if valid_above:
        return min(valid_above, key=lambda r: r["rate"])
    return min(runs, key=lambda r: abs(math.log(r["rate"] / rate)))


def bracketed(search: Mapping[str, Any]) -> bool:
    """Whether the search saw an INVALID rate above its capacity (else the capacity is a
    lower bound: the budget ran out while doubling)."""
    capacity = float(search["capacity_qps"])
    return capacity <= 0 or any(not r["valid"] and r["rate"] > capacity
                                for r in search.get("runs", []))


def _as_check(check: CapacityCheck, unit: str, values: tuple[list[float], list[float]],
              verdict: LlmVerdict | None = None, tolerance_pct: float = 0.0,
              inconclusive: bool = False) -> Check:
    """The capacity check as a comparison's check: its verdict is the interval's (PASS
    wholly above the line, FAIL wholly below, else INCONCLUSIVE); for Holm the interval's
    half-width stands for 1.96 standard errors (it is no t interval: its resolution part is
    a bound)."""
    cand, ref = summarize(values[0]), summarize(values[1])
    if verdict is None or cand.mean <= 0 or ref.mean <= 0:
        diff = 0.0 if ref.mean == 0 else (cand.mean / ref.mean - 1) * 100
        outcome = "INCONCLUSIVE" if inconclusive else "PASS" if check.passed else "FAIL"
        return Check(metric=check.name, unit=unit, candidate=cand, reference_mean=ref.mean,
                     reference=ref, difference_pct=diff, ci_pct=None, mdd_pct=None,
                     band=Band(), verdict=outcome, reason=check.detail)
    interval = verdict.capacity
    n = interval.repeats
    # the repeats' t interval on n - 1 df, widened by the brackets' bound: Holm reads it as
    # a t interval of that width on the same df (a bound is no standard error; it only
    # widens, so the family's error stays within its level), and a sequential design's
    # looks judge it at the one-sample t process's boundaries (one_sample_t): on 3 to 11
    # df the normal boundaries' nominal levels FAILed a system at the margin 2.9% of the
    # time for a one-sided 2.5%
    df = float(max(n - 1, 1))
    se = 100 * (math.log(interval.high) - math.log(interval.low)) / (2 * t_quantile(0.975, df))
    ci = ((interval.low - 1) * 100, (interval.high - 1) * 100)
    outcome = interval.verdict(1 - tolerance_pct / 100)
    reason = check.detail
    too_few = (f"{n} repeat{'s' if n > 1 else ''}: a capacity verdict needs at least "
               f"{MIN_REPEATS}") if n < MIN_REPEATS else None
    if n < MIN_REPEATS and outcome != "FAIL":
        outcome = "INCONCLUSIVE"
        reason += (f"; {n} repeat{'s' if n > 1 else ''}: a capacity verdict needs at least "
                   f"{MIN_REPEATS} (a t interval of their spread); more repeats would decide")
    elif n < MIN_REPEATS:
        reason += f"; below the line even at {n} repeats' hull"
    elif outcome == "INCONCLUSIVE" and "raise capacity.runs" not in reason:
        floor = interval.resolution_pct
        finer = (f"; the brackets alone (+/-{floor:.1f}%) take up most of the allowed "
                 f"-{tolerance_pct:g}%: a finer capacity.resolution would decide"
                 if floor >= tolerance_pct / 2 else "")
        reason += ("; the interval straddles the line: more repeats would decide" + finer)
    return Check(metric=check.name, unit=unit, candidate=cand, reference_mean=ref.mean,
                 reference=ref, difference_pct=(interval.ratio - 1) * 100, ci_pct=ci,
                 mdd_pct=None, band=Band(lower_pct=-tolerance_pct),
                 verdict=outcome, reason=reason,
                 design="interleaved", se_pct=se, df=df,
                 log_difference=100 * math.log(interval.ratio), units=n,
                 shrinking_var=(se or 0.0) ** 2, one_sample_t=n >= MIN_REPEATS,
                 pass_blocked=too_few, bracket_pct=interval.resolution_pct)


def more_runs(width: float, resolution: float) -> int:
    """The bisections that narrow a bracket ``width`` wide (high / low) to
    ``resolution`` (a fraction)."""
    if width <= 1 + resolution or resolution <= 0:
        return 0
    return math.ceil(math.log2(math.log(width) / math.log1p(resolution)) - 1e-12)


def _bracket_advice(vm: Sequence[Mapping[str, Any]], bare: Sequence[Mapping[str, Any]],
                    resolution: float) -> str:
    """The searches whose final bracket is wider than the resolution asked for (the budget
    of runs ran out first): by how much, and the capacity.runs that would narrow them."""
    return _wide_brackets([(f"{side} repeat {i}", search)
                           for side, found in (("VM", vm), ("bare metal", bare))
                           for i, search in enumerate(found)], resolution)


def _wide_brackets(searches: Sequence[tuple[str, Mapping[str, Any]]],
                   resolution: float) -> str:
    wide, extra, runs = [], 0, 0
    for label, search in searches:
        b = search_bracket({**search, "capacity_qps": _confirmed(search)})
        width = b.high / b.low if b.low > 0 else 1.0
        if width - 1 > resolution * 1.0001:
            wide.append(f"{label} {b.low:.1f}-{b.high:.1f}/s ({(width - 1) * 100:.1f}%)")
            extra = max(extra, more_runs(width, resolution))
            runs = max(runs, int((search.get("budget") or {}).get("runs") or 0)
                       or len(search.get("runs", [])))
    if not wide:
        return ""
    shown = ", ".join(wide[:4]) + (f" and {len(wide) - 4} more" if len(wide) > 4 else "")
    return (f"; brackets wider than the resolution {resolution:.0%}: {shown}: the runs ran "
            f"out before the bisection did; raise capacity.runs to {runs + extra} "
            f"({extra} more bisection{'s' if extra > 1 else ''}) to reach it")


def shortfall(vm: Sequence[Sequence[Mapping[str, Any]]],
              bare: Sequence[Sequence[Mapping[str, Any]]]) -> str:
    """``_bracket_advice`` over every instance of paired repeats (``vm[i][k]``)."""
    labelled = [(f"{side} repeat {i} instance {k}", search)
                for side, found in (("VM", vm), ("bare metal", bare))
                for i, repeat in enumerate(found) for k, search in enumerate(repeat)]
    resolution = max((float((s.get("budget") or {}).get("resolution") or 0)
                      for _, s in labelled), default=0.0)
    return _wide_brackets(labelled, resolution) if resolution > 0 else ""


def _matched_detail(rates: Sequence[tuple[float, Mapping[str, Any]]]) -> str:
    parts = []
    for rate, run in rates:
        at = "" if math.isclose(run["rate"], rate, rel_tol=1e-9) else \
            f" (its run at {run['rate']:.1f}/s)"
        ttft, tpot = run.get("ttft_p99_ms"), run.get("tpot_p99_ms")
        parts.append(f"{rate:.1f}/s{at}: TTFT p99 "
                     f"{'-' if ttft is None else f'{ttft:.1f}'} ms, TPOT p99 "
                     f"{'-' if tpot is None else f'{tpot:.2f}'} ms")
    return "; VM at bare metal's capacity less the allowed loss " + ", ".join(parts)


def instance_checks(label: str, vm: Sequence[Mapping[str, Any]],
                    bare: Sequence[Mapping[str, Any]], capacity_pct: float,
                    itl_pct: float) -> list[Check]:
    """One instance position's checks from its paired searches (``vm[i]`` with
    ``bare[i]``). The allowed capacity loss is the stated ``capacity_pct``; each side's
    capacity is known only within its bracket, so the brackets widen the ratio's interval
    (``bracket_interval``), never the margin: a resolution near the margin leaves the
    verdict INCONCLUSIVE and says a finer one would decide."""
    resolution = max((float((s.get("budget") or {}).get("resolution") or 0)
                      for s in (*bare, *vm)), default=0.0)
    allowed = capacity_pct
    suffix = f" {label}" if label else ""
    vm_doc, bare_doc = _document(vm), _document(bare)
    caps = ([_confirmed(s) for s in vm], [_confirmed(s) for s in bare])
    # a search whose only VALID rate failed its rerun is at its knee there (VALID half
    # the times it ran), like any other; only one VALID less often than that is not
    unconfirmed = [f"{side} repeat {i} ({float(search['capacity_qps']):.1f}/s VALID, "
                   "INVALID on more of its reruns)"
                   for side, found in (("VM", vm), ("bare metal", bare))
                   for i, search in enumerate(found)
                   if system.knee(search) <= 0 < float(search["capacity_qps"])]
    if unconfirmed:
        return [_as_check(CapacityCheck(CAPACITY_CHECK + suffix, False, (
            f"no rate VALID at least half the times it ran in {', '.join(unconfirmed)}: "
            "the capacity lies below the lowest rate tried, or that run was disturbed; "
            "lower capacity.start_qps")), "queries/s", caps, inconclusive=True)]
    if min(caps[1]) <= 0 or min(caps[0]) <= 0:
        return [_as_check(CapacityCheck(CAPACITY_CHECK + suffix, False,
                                        "a search found no VALID rate on one side"),
                          "queries/s", caps)]
    open_ended = [f"{side} repeat {i}" for side, searches in (("VM", vm), ("bare metal", bare))
                  for i, search in enumerate(searches) if not bracketed(search)]
    if open_ended:
        return [_as_check(CapacityCheck(CAPACITY_CHECK + suffix, False, (
            f"no INVALID rate above the capacity in {', '.join(open_ended)}: the search ran "
            "out of runs while doubling, so its capacity is only a lower bound; raise "
            "capacity.start_qps or capacity.runs")), "queries/s", caps, inconclusive=True)]
    # the gate's load: bare metal's capacity less the loss the capacity check allows (a
    # stricter gate would fail what the ratio passes: an outcome flipped at the knee)
    floor = 1 - allowed / 100
    matched = [(_confirmed(b) * floor, matched_run(v, _confirmed(b) * floor))
               for v, b in zip(vm, bare, strict=True)]
    vm_matched = {**{k: vm_doc.get(k) for k in SETUP_KEYS},
                  "repeats": [{"repeat": i, "rate": rate, "matched": run}
                              for i, (rate, run) in enumerate(matched)]}
    try:
        verdict = judge_capacity(bare_doc, vm_doc, vm_matched, capacity_pct=allowed,
                                 itl_pct=itl_pct, tpot_pct=itl_pct)
    except ValueError as exc:
        return [_as_check(CapacityCheck(CAPACITY_CHECK + suffix, False, str(exc)),
                          "queries/s", caps)]
    checks = []
    for check in verdict.checks:
        named = CapacityCheck(check.name + suffix, check.passed, check.detail)
        if check.name == CAPACITY_CHECK:
            finals = ", ".join(f"{float(v['capacity_qps']):.1f}/{float(b['capacity_qps']):.1f}"
                               for v, b in zip(vm, bare, strict=True))
            detail = (f"{named.detail}; capacities at each search's knee (its final "
                      f"point, VALID at least half the times it ran there) VM/bare metal "
                      f"{finals}"
                      f"{_bracket_advice(vm, bare, resolution)}")
            checks.append(_as_check(CapacityCheck(named.name, named.passed, detail),
                                    "queries/s", caps, verdict, allowed))
        elif check.name == "valid_at_bare_metal_capacity":
            valid = sum(bool(r["valid"]) for _, r in matched)
            invalid = [r for _, r in matched if not r["valid"]]
            detail = (f"{valid}/{len(matched)} VM runs VALID at bare metal's capacity less "
                      f"the allowed {allowed:g}%"
                      + (f"; {invalid[0]['reasons'][0]}" if invalid else "")
                      + _matched_detail(matched))
            checks.append(_valid_check(named.name, detail,
                                       [bool(r["valid"]) for _, r in matched]))
        else:
            key = "itl_p99_ms" if "inter_token" in check.name else "tpot_mean_ms"
            pairs = [shared_load(v, b) for v, b in zip(vm, bare, strict=True)]
            pooled = _tail_check(named.name, pairs, itl_pct) if key == "itl_p99_ms" \
                else None
            checks.append(pooled or _rise_check(named.name, key, pairs, itl_pct))
    return checks


def shared_load(vm: Mapping[str, Any], bare: Mapping[str, Any],
                share: float = LATENCY_LOAD_SHARE) \
        -> tuple[float, Mapping[str, Any], Mapping[str, Any]]:
    """The load both sides of a repeat ran, for the latency checks: the highest rate both
    searches ran at or below ``share`` of the lower of the two knees (each
    side's last run there; the same seeded arrivals, so the latencies compare query for
    query); else the lowest rate both ran; else bare metal's capacity with the VM's run
    standing for it (``matched_run``). A latency depends on the load (a longer batch,
    longer steps): a VM run at another rate would compare loads, not slices. Below the
    knee: at a side's own capacity its latency is the knee's queueing, which moves tenfold
    when that side's capacity moves a few percent between repeats, so two identical
    slices would differ there by whatever their knees did."""
    lower = min(_confirmed(vm), _confirmed(bare))
    shared = sorted({float(r["rate"]) for r in bare["runs"]
                     if any(math.isclose(v["rate"], r["rate"], rel_tol=1e-9)
                            for v in vm["runs"])})
    below = [rate for rate in shared if rate <= share * lower * (1 + 1e-9)]
    if shared:
        rate = below[-1] if below else shared[0]
        vm_there = [r for r in vm["runs"] if math.isclose(r["rate"], rate, rel_tol=1e-9)]
        bare_there = [r for r in bare["runs"] if math.isclose(r["rate"], rate, rel_tol=1e-9)]
        return rate, vm_there[-1], bare_there[-1]
    capacity = _confirmed(bare)
    return capacity, matched_run(vm, capacity), _at_capacity(bare)


def gate_p_value(invalid: int, runs: int) -> float:
    """The chance of ``invalid`` or more INVALID VM runs of ``runs`` at the allowed line
    when the VM's capacity is at that line or above (``GATE_INVALID_SHARE``): the VALID
    gate's one-sided p of a FAIL."""
    p = GATE_INVALID_SHARE
    return sum(math.comb(runs, k) * p ** k * (1 - p) ** (runs - k)
               for k in range(invalid, runs + 1))


def _valid_check(name: str, detail: str, valid: Sequence[bool]) -> Check:
    """The VM's runs at bare metal's capacity less the allowed loss as a non-inferiority
    test in the Holm family: FAIL when that many INVALID runs are unlikely for a VM within
    the margin (``gate_p_value`` at most 2.5%; Holm may keep it from FAIL among several
    checks), PASS when at most half are INVALID (no sign the VM is below the line), else
    INCONCLUSIVE. Holm reads its p through a normal quantile on the log scale (se 1, no
    df limit, the line at 0); the share VALID is what it shows."""
    shares = [100.0 if v else 0.0 for v in valid]
    summary = summarize(shares)
    n, invalid = len(valid), sum(not v for v in valid)
    p = gate_p_value(invalid, n) if n else 1.0
    if p <= FAIL_P:
        verdict = "FAIL"
    elif invalid <= GATE_INVALID_SHARE * n:
        verdict = "PASS"
    else:
        verdict = "INCONCLUSIVE"
    needed = next(m for m in range(1, 64) if gate_p_value(m, m) <= FAIL_P)
    said = (f"; {invalid} INVALID of {n}: p = {p:.3f} for a VM within the margin "
            f"(VALID there at least half the time)")
    if verdict == "INCONCLUSIVE":
        said += (f"; a FAIL needs p <= {FAIL_P:.1%} (e.g. {needed} of {needed} INVALID): "
                 "more repeats would decide")
    z = NormalDist().inv_cdf(min(max(p, 1e-12), 1 - 1e-12))
    return Check(metric=name, unit=GATE_UNIT, candidate=summary,
                 reference_mean=100.0, reference=None, difference_pct=summary.mean - 100,
                 ci_pct=None, mdd_pct=None, band=Band(lower_pct=0.0),
                 verdict=verdict, reason=detail + said,  # type: ignore[arg-type]
                 design="interleaved", se_pct=1.0, df=math.inf, log_difference=z,
                 units=n)


def _rise_check(name: str, key: str,
                pairs: Sequence[tuple[float, Mapping[str, Any], Mapping[str, Any]]],
                allowed_pct: float) -> Check:
    """A latency rise at the load both sides ran (``shared_load``), VM over bare metal,
    with the interval of its per-repeat log ratios (paired), so that a FAIL joins the Holm
    family: one repeat's stall on shared cores is not a finding unless the repeats agree.
    PASS when the mean rise is within ``allowed_pct``."""
    measured = [(float(v[key]), float(b[key])) for _, v, b in pairs
                if v.get(key) is not None and b.get(key) is not None
                and v[key] > 0 and b[key] > 0]
    rates = ", ".join(f"{rate:.1f}/s" for rate, _, _ in pairs)
    if not measured:
        return Check(metric=name, unit="ms", candidate=summarize([0.0]), reference_mean=0.0,
                     reference=None, difference_pct=0.0, ci_pct=None, mdd_pct=None,
                     band=Band(upper_pct=allowed_pct), verdict="FAIL",
                     reason=f"not measured on both sides at {rates}")
    cand, ref = summarize([v for v, _ in measured]), summarize([b for _, b in measured])
    rise = (cand.mean / ref.mean - 1) * 100
    logs = [100 * math.log(v / b) for v, b in measured]
    diffs = summarize(logs)
    se = df = ci = None
    if len(logs) >= 2 and diffs.stdev is not None:
        df = float(len(logs) - 1)
        se = diffs.stdev / math.sqrt(len(logs))
        half = t_quantile(0.975, len(logs) - 1) * se
        ci = (100 * math.expm1((diffs.mean - half) / 100),
              100 * math.expm1((diffs.mean + half) / 100))
    reason = (f"VM {cand.mean:.2f} ms vs bare metal {ref.mean:.2f} ms ({rise:+.1f}%, "
              f"allowed +{allowed_pct:g}%) at the load both searches ran per repeat, at most "
              f"{LATENCY_LOAD_SHARE:.0%} of the lower capacity: {rates}")
    return Check(metric=name, unit="ms", candidate=cand, reference_mean=ref.mean,
                 reference=ref, difference_pct=rise, ci_pct=ci, mdd_pct=None,
                 band=Band(upper_pct=allowed_pct),
                 verdict="PASS" if rise <= allowed_pct else "FAIL", reason=reason,
                 design="interleaved", se_pct=se, df=df, log_difference=diffs.mean,
                 units=len(logs), shrinking_var=(se or 0.0) ** 2)


def _tail_check(name: str,
                pairs: Sequence[tuple[float, Mapping[str, Any], Mapping[str, Any]]],
                allowed_pct: float) -> Check | None:
    """Inter-token latency p99 at the shared load, pooled over the repeats (every gap of
    the runs; vgpu.results.stats.tails) with its order-statistic interval: FAIL when the whole
    interval of the rise is above ``allowed_pct``, PASS when the pooled rise is within it,
    else INCONCLUSIVE. The pooled TTFT and TPOT p99 are stated beside it. None when a run
    stored no tails."""
    vm_runs, bare_runs = [v for _, v, _ in pairs], [b for _, _, b in pairs]
    itl = tail_ratio(vm_runs, bare_runs, "itl")
    if itl is None:
        return None
    line = 1 + allowed_pct / 100
    own = [float(v["itl_p99_ms"]) / float(b["itl_p99_ms"]) for v, b in zip(
        vm_runs, bare_runs, strict=True) if v.get("itl_p99_ms") and b.get("itl_p99_ms")]
    # the gaps of one stall of the machine are many tail samples but one event: a FAIL
    # needs every repeat's own p99 above the line as well, not one repeat's hiccup
    agree = len(own) == len(pairs) and min(own) > line
    verdict = "FAIL" if itl.low > line and agree else "PASS" if itl.ratio <= line \
        else "INCONCLUSIVE"
    stated = [f"ITL p99 VM {itl.vm.describe()} vs bare metal {itl.bare.describe()}"]
    for latency, label in (("ttft", "TTFT"), ("tpot", "TPOT")):
        other = tail_ratio(vm_runs, bare_runs, latency)
        if other is not None:
            stated.append(f"{label} p99 VM {other.vm.describe()} vs bare metal "
                          f"{other.bare.describe()} ({(other.ratio - 1) * 100:+.1f}% "
                          f"[{(other.low - 1) * 100:+.1f}%, {(other.high - 1) * 100:+.1f}%])")
    rates = ", ".join(f"{rate:.1f}/s" for rate, _, _ in pairs)
    repeats = ", ".join(f"{(r - 1) * 100:+.1f}%" for r in own)
    disagree = "" if agree or itl.low <= line else \
        "; the repeats disagree (a stall of the shared machine in one run?): not a FAIL"
    blocked = None if agree else (
        f"not every repeat's own p99 is above +{allowed_pct:g}% ({repeats}): one "
        "repeat's stall is not a finding")
    reason = (f"pooled over {len(pairs)} repeats at the load both searches ran, at most "
              f"{LATENCY_LOAD_SHARE:.0%} of the lower capacity ({rates}): "
              f"rise {(itl.ratio - 1) * 100:+.1f}% [{(itl.low - 1) * 100:+.1f}%, "
              f"{(itl.high - 1) * 100:+.1f}%], each repeat's own {repeats}, allowed "
              f"+{allowed_pct:g}%{disagree}; " + "; ".join(stated))
    se = _tail_se(itl)
    values = ([float(v["itl_p99_ms"] or 0) for v in vm_runs],
              [float(b["itl_p99_ms"] or 0) for b in bare_runs])
    return Check(metric=name, unit="ms", candidate=summarize(values[0]),
                 reference_mean=itl.bare.value, reference=summarize(values[1]),
                 difference_pct=(itl.ratio - 1) * 100,
                 ci_pct=((itl.low - 1) * 100, (itl.high - 1) * 100), mdd_pct=None,
                 band=Band(upper_pct=allowed_pct), verdict=verdict, reason=reason,
                 design="interleaved", se_pct=se, df=math.inf,
                 log_difference=100 * math.log(itl.ratio), units=len(pairs),
                 shrinking_var=se ** 2, fail_blocked=blocked)


def _tail_se(ratio: TailRatio) -> float:
    """A pooled tail ratio's standard error for Holm and the looks (log percent): its
    order-statistic interval read as a normal 95% one."""
    return 100 * math.log(ratio.high / ratio.low) / (2 * t_quantile(0.975, math.inf))


def _at_capacity(search: Mapping[str, Any]) -> Mapping[str, Any]:
    at = [r for r in search["runs"] if r["valid"] and r["rate"] == _confirmed(search)]
    return at[-1] if at else {}


def capacity_checks(candidate: SeriesData, reference: SeriesData,
                    tolerances: Mapping[str, float], default_tolerance: float) -> list[Check]:
    """The checks of every instance position both series measured capacity on; none when
    either measured none. ``tolerances``: the comparison's per-metric bands (fractions);
    the capacity band is the stated ``capacity_at_slo`` one, else ``default_tolerance``
    (the throughput band), the inter-token one the token band (tpot_pct)."""
    cand, ref = searches(candidate), searches(reference)
    if not cand or not ref:
        return []
    pairs = _paired(candidate, reference)
    if not pairs:
        return []
    positions = min(len(cand[0]), len(ref[0]))
    itl = 100 * tolerances.get("inter_token_latency_p99", 0.05)
    allowed = 100 * tolerances.get(CAPACITY_CHECK, default_tolerance)
    names = [inst.result.name for inst in candidate.instances[candidate.valid_run_ids[0]]]
    shared = sharing(candidate, reference) if positions > 1 else None
    return position_checks(names[:positions], [cand[i][:positions] for i, _ in pairs],
                           [ref[j][:positions] for _, j in pairs], allowed, itl, shared)


def position_checks(names: Sequence[str], vm: Sequence[Sequence[Mapping[str, Any]]],
                    bare: Sequence[Sequence[Mapping[str, Any]]], allowed: float,
                    itl: float, shared: Sharing | None) -> list[Check]:
    """The checks of paired repeats (``vm[i][k]``: repeat i's search of instance k):
    per instance (``instance_checks``), or with the capacity judged as a system when the
    instances share their compute (``shared``; vgpu.results.verdict.capacity_system), their own
    capacity checks then shown in its reason and not judged."""
    checks: list[Check] = []
    shown: list[str] = []
    latencies: list[str] = []
    as_system = shared is not None and shared.shared
    for position, name in enumerate(names):
        label = name if len(names) > 1 else ""
        vm_k, bare_k = [r[position] for r in vm], [r[position] for r in bare]
        found = instance_checks(label, vm_k, bare_k, allowed, itl)
        if as_system:
            own = [c for c in found if c.metric.startswith(
                (CAPACITY_CHECK, "valid_at_bare_metal_capacity"))]
            shown.append(f"{label} {system.ratio_text(vm_k, bare_k)}" + "".join(
                f", {c.metric.split(' ')[0]} would be {c.verdict}" for c in own))
            latencies += [f"{c.metric} {c.difference_pct:+.1f}%" for c in found
                          if c not in own]
            found = []
        checks += found
    if as_system:
        assert shared is not None
        checks.insert(0, _system_check(vm, bare, allowed, shown, shared.why))
        guard = _system_itl_guard(vm, bare, itl, latencies, shared.why)
        if guard is not None:
            checks.insert(1, guard)
    elif shared is not None:
        checks = [replace(c, reason=f"{c.reason}; judged per instance: {shared.why}")
                  if c.metric.startswith(CAPACITY_CHECK) else c for c in checks]
    return checks


def _system_itl_guard(vm: Sequence[Sequence[Mapping[str, Any]]],
                      bare: Sequence[Sequence[Mapping[str, Any]]], allowed_pct: float,
                      latencies: Sequence[str], why: str) -> Check | None:
    """The inter-token latency p99 of instances that share their compute, as a guard
    (Check.guard): every instance's gaps at the load both of its searches ran
    (``shared_load``) pooled per repeat and over the repeats. An instance's latency at a
    rate is set by what its neighbours ran at the same moment, which the searches do not
    hold equal (run to run, one instance's p99 ratio moved 0.3x to 4x between identical
    sides on two shared cores), so no equivalence can be shown at a few percent; a stall
    of the VM's machine raises every instance's gaps at once, so the guard FAILs when the
    pooled interval and every repeat's own pooled p99 are above the line; otherwise it
    shows what it found and decides nothing. None when a run stored no tails."""
    per_repeat = [[shared_load(v, b) for v, b in zip(vm_r, bare_r, strict=True)]
                  for vm_r, bare_r in zip(vm, bare, strict=True)]
    pooled = tail_ratio([v for rep in per_repeat for _, v, _ in rep],
                        [b for rep in per_repeat for _, _, b in rep], "itl")
    own = [tail_ratio([v for _, v, _ in rep], [b for _, _, b in rep], "itl")
           for rep in per_repeat]
    if pooled is None or any(o is None for o in own):
        return None
    line = 1 + allowed_pct / 100
    ratios = [o.ratio for o in own if o is not None]
    repeats = ", ".join(f"{(r - 1) * 100:+.1f}%" for r in ratios)
    agree = min(ratios) > line
    verdict: Verdict = "FAIL" if pooled.low > line and agree else "PASS"
    said = ("above the line in the pooled interval and in every repeat: a stall of the "
            "VM's machine" if verdict == "FAIL" else
            "not a FAIL (a guard: it FAILs only on a rise the pooled interval and every "
            "repeat show; on shared compute it cannot show equivalence, so its PASS "
            "decides nothing)")
    reason = (f"{why}: judged as a system, the instances' gaps pooled at the load both "
              f"searches ran: rise {(pooled.ratio - 1) * 100:+.1f}% "
              f"[{(pooled.low - 1) * 100:+.1f}%, {(pooled.high - 1) * 100:+.1f}%], each "
              f"repeat's own {repeats}, allowed +{allowed_pct:g}%: {said}; ITL p99 VM "
              f"{pooled.vm.describe()} vs bare metal {pooled.bare.describe()}"
              + (f"; per instance, shown and not judged: {', '.join(latencies)}"
                 if latencies else ""))
    se = _tail_se(pooled)
    vm_p99 = [o.vm.value for o in own if o is not None]
    bare_p99 = [o.bare.value for o in own if o is not None]
    return Check(metric=f"inter_token_latency_p99_at_matched_load {system.SYSTEM_LABEL}",
                 unit="ms", candidate=summarize(vm_p99), reference_mean=pooled.bare.value,
                 reference=summarize(bare_p99), difference_pct=(pooled.ratio - 1) * 100,
                 ci_pct=((pooled.low - 1) * 100, (pooled.high - 1) * 100), mdd_pct=None,
                 band=Band(upper_pct=allowed_pct), verdict=verdict, reason=reason,
                 design="interleaved", se_pct=se, df=math.inf,
                 log_difference=100 * math.log(pooled.ratio), units=len(per_repeat),
                 shrinking_var=se ** 2, guard=True,
                 fail_blocked=None if agree else (
                     f"not every repeat's own pooled p99 is above +{allowed_pct:g}% "
                     f"({repeats}): one repeat's stall is not a finding"))


def _system_check(vm: Sequence[Sequence[Mapping[str, Any]]],
                  bare: Sequence[Sequence[Mapping[str, Any]]], allowed: float,
                  shown: Sequence[str], why: str) -> Check:
    """The system's capacity check (vgpu.results.verdict.capacity_system), INCONCLUSIVE like an
    instance's when a search is unconfirmed or open-ended."""
    caps = ([sum(_confirmed(s) for s in r) for r in vm],
            [sum(_confirmed(s) for s in r) for r in bare])
    name = f"{CAPACITY_CHECK} {system.SYSTEM_LABEL}"
    open_ended = [f"{side} repeat {i}" for side, found in (("VM", vm), ("bare metal", bare))
                  for i, repeat in enumerate(found)
                  if not all(bracketed(s) and system.knee(s) > 0 for s in repeat)]
    if open_ended:
        return _as_check(CapacityCheck(name, False, (
            f"an instance's search found no knee (no rate VALID at least half the times it "
            f"ran) or no INVALID rate above it "
            f"in {', '.join(open_ended)}: the system's capacity is not bracketed; raise "
            "capacity.runs or move capacity.start_qps")), "queries/s", caps,
            inconclusive=True)
    check, verdict = system.system_verdict(vm, bare, allowed, shown, why)
    check = replace(check, detail=check.detail + shortfall(vm, bare))
    return _as_check(check, "queries/s", caps, verdict, allowed)


def kept_at_look(check: Check, judged: Check) -> Check:
    """A capacity check as its design's look judged it (``judged``: compare.at_look), its
    own detail kept beside the look's interval: what the searches resolved and how the
    system was chosen. What would decide it comes last (vgpu.results.verdict.decided reads the
    last advice): the brackets' capacity.runs when they did not reach the resolution and
    make a real share of the interval (``BRACKETS_DECIDE``), else the look's blocks (a
    noise-bound interval is not narrowed by one more bisection)."""
    if not check.metric.startswith(CAPACITY_CHECK) or judged.reason == check.reason:
        return judged
    if "raise capacity.runs" in check.reason and _brackets_decide(check, judged):
        return replace(judged, reason=f"{judged.reason}; {check.reason}")
    return replace(judged, reason=f"{check.reason}; {judged.reason}")


BRACKETS_DECIDE = 0.25  # of the interval's half-width, for capacity.runs to be the advice


def _brackets_decide(check: Check, judged: Check) -> bool:
    interval = judged.ci_pct or check.ci_pct
    if interval is None or min(interval) <= -100:
        return True
    half = 50 * (math.log1p(interval[1] / 100) - math.log1p(interval[0] / 100))
    return check.bracket_pct >= BRACKETS_DECIDE * half

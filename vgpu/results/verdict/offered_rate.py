"""A Server or Interactive series at a fixed target rate: LoadGen offers the rate the
scenario asks for and the samples/s it logs is that rate, whatever the slice can do (a
slice with a third of the capacity logs the same), so no throughput is judged there. What
such a run can find is whether the slice held the rate: LoadGen's VALID (every latency
bound met). This check compares that outcome repeat by repeat with the reference's:

- PASS: the candidate VALID in at least the repeats its series asks for (``min_valid``,
  by default every one);
- FAIL: no repeat VALID, where the reference was VALID in every one, and that split is
  unlikely by chance: Fisher's exact one-sided p = 1 / C(n + m, n) at most
  ``FAIL_P`` (2.5%, as every check here): 4 repeats a side, or 3 against 5; 3 against 3
  (p = 5%) is not enough;
- else INCONCLUSIVE, saying what would decide it;
- INCONCLUSIVE too when the two sides did not offer the same load (``SAME_LOAD``: the
  target rate, the latency bound): their VALIDs would answer different questions.

The check is a gate (no interval), like the accuracy gate; the latency checks judge how
far the p99s moved. Capacity at the SLO (a search of rates) judges a slice's capacity."""

from __future__ import annotations

import math
from typing import Any

from vgpu.results.stats.intervals import summarize
from vgpu.results.store.series import SeriesData
from vgpu.results.verdict.compare import Band, Check

OFFERED_RATE_CHECK = "valid_at_offered_rate"
FAIL_P = 0.025
SAME_LOAD = ("target_qps", "target_latency_ms")


def _detail(series: SeriesData) -> dict[str, Any]:
    return series.runs[0].workload_detail if series.runs else {}


def measured_capacity(series: SeriesData) -> bool:
    """Whether the series searched for its capacity at the SLO (its own checks)."""
    return (_detail(series).get("llm") or {}).get("capacity") is not None


def fisher_one_sided(candidate_runs: int, reference_runs: int) -> float:
    """P of every INVALID repeat falling on the candidate's side by chance, when all of
    the candidate's and none of the reference's were INVALID."""
    return 1.0 / math.comb(candidate_runs + reference_runs, candidate_runs)


def _load_differences(candidate: SeriesData, reference: SeriesData) -> list[str]:
    cand, ref = _detail(candidate), _detail(reference)
    return [f"{key} {cand.get(key)} against the reference's {ref.get(key)}"
            for key in SAME_LOAD if cand.get(key) != ref.get(key)]


def _shares(series: SeriesData) -> list[float]:
    valid = set(series.valid_run_ids)
    return [100.0 if run.id in valid else 0.0 for run in series.runs]


def _rate(series: SeriesData) -> str:
    rate = _detail(series).get("target_qps")
    return f"{float(rate):g} queries/s per instance" if isinstance(rate, int | float) \
        else "the scenario's target rate"


def offered_rate_check(candidate: SeriesData, reference: SeriesData) -> Check:
    """Whether the candidate held the offered rate where the reference did."""
    cand, ref = _shares(candidate), _shares(reference)
    held = sum(v > 0 for v in cand)
    ref_held = sum(v > 0 for v in ref)
    counts = (f"VALID in {held} of {len(cand)} repeats at {_rate(candidate)}, the "
              f"reference in {ref_held} of {len(ref)}")
    differences = _load_differences(candidate, reference)
    if differences:
        verdict, reason = "INCONCLUSIVE", (
            f"{counts}; the two sides were not offered the same load ("
            f"{', '.join(differences)}): run both with the same workload settings")
    elif cand and candidate.valid_shortfall is None:
        verdict, reason = "PASS", (f"{counts}: the rate was held every time" if held == len(cand)
                                   else f"{counts}: at least the {candidate.min_valid} the "
                                        "series asks for (min_valid)")
    elif (held == 0 and ref and ref_held == len(ref)
          and fisher_one_sided(len(cand), len(ref)) <= FAIL_P):
        first = candidate.invalid_runs[0].reasons[:1] if candidate.invalid_runs else []
        verdict, reason = "FAIL", (
            f"{counts}: INVALID in every repeat at a rate the reference held in every one "
            f"(Fisher's one-sided p = {fisher_one_sided(len(cand), len(ref)):.3f})"
            + (f"; LoadGen: {first[0]}" if first else ""))
    else:
        verdict = "INCONCLUSIVE"
        if ref_held < len(ref):
            advice = ("the reference did not hold the rate every time either: a lower "
                      "target_qps, or a capacity search (capacity:), would decide")
        else:
            advice = ("a FAIL needs every repeat INVALID on the candidate's side, none on "
                      f"the reference's, and enough of them (Fisher's p <= {FAIL_P:.1%}: 4 a "
                      "side, or 3 against 5): more repeats, or a capacity search "
                      "(capacity:), would decide")
        reason = f"{counts}; {advice}"
    summary, ref_summary = summarize(cand or [0.0]), summarize(ref or [0.0])
    relative = (summary.mean / ref_summary.mean - 1) * 100 if ref_summary.mean > 0 else 0.0
    return Check(metric=OFFERED_RATE_CHECK, unit="% of runs VALID", candidate=summary,
                 reference_mean=ref_summary.mean, reference=ref_summary,
                 difference_pct=relative, ci_pct=None, mdd_pct=None,
                 band=Band(lower_pct=0.0), verdict=verdict, reason=reason,
                 units=len(cand))

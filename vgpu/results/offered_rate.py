"""A Server or Interactive series at a fixed target rate: LoadGen offers the rate the
scenario asks for and the samples/s it logs is that rate, whatever the slice can do (a
slice with a third of the capacity logs the same), so no throughput is judged there. What
such a run can find is whether the slice held the rate: LoadGen's VALID (every latency
bound met). This check compares that outcome repeat by repeat with the reference's:

- PASS: every repeat of the candidate VALID (at least its ``min_valid``);
- FAIL: no repeat VALID, where the reference was VALID in every one (at least
  ``FAIL_REPEATS`` repeats on each side: one bad repeat on a shared machine is not a
  finding);
- else INCONCLUSIVE, saying what would decide it.

The check is a gate (no interval), like the accuracy gate; the latency checks judge how
far the p99s moved. Capacity at the SLO (a search of rates) judges a slice's capacity."""

from __future__ import annotations

from vgpu.results.compare import Band, Check
from vgpu.results.series import SeriesData
from vgpu.results.stats import summarize

OFFERED_RATE_CHECK = "valid_at_offered_rate"
FAIL_REPEATS = 3


def _shares(series: SeriesData) -> list[float]:
    valid = set(series.valid_run_ids)
    return [100.0 if run.id in valid else 0.0 for run in series.runs]


def _rate(series: SeriesData) -> str:
    detail = series.runs[0].workload_detail if series.runs else {}
    rate = detail.get("target_qps")
    return f"{float(rate):g} queries/s per instance" if isinstance(rate, int | float) \
        else "the scenario's target rate"


def offered_rate_check(candidate: SeriesData, reference: SeriesData) -> Check:
    """Whether the candidate held the offered rate where the reference did."""
    cand, ref = _shares(candidate), _shares(reference)
    held = sum(v > 0 for v in cand)
    ref_held = sum(v > 0 for v in ref)
    counts = (f"VALID in {held} of {len(cand)} repeats at {_rate(candidate)}, the "
              f"reference in {ref_held} of {len(ref)}")
    if cand and candidate.valid_shortfall is None:
        verdict, reason = "PASS", (f"{counts}: the rate was held every time" if held == len(cand)
                                   else f"{counts}: at least the {candidate.min_valid} the "
                                        "series asks for (min_valid)")
    elif (held == 0 and ref_held == len(ref) and len(cand) >= FAIL_REPEATS
          and len(ref) >= FAIL_REPEATS):
        verdict, reason = "FAIL", (f"{counts}: the candidate missed a latency bound in every "
                                   "repeat at a rate the reference held in every one")
    else:
        verdict = "INCONCLUSIVE"
        if ref_held < len(ref):
            advice = ("the reference did not hold the rate every time either: a lower "
                      "target_qps, or a capacity search (capacity:), would decide")
        else:
            advice = (f"a FAIL needs every one of at least {FAIL_REPEATS} repeats INVALID "
                      "on the candidate's side and none on the reference's: more repeats, "
                      "or a capacity search (capacity:), would decide")
        reason = f"{counts}; {advice}"
    summary, ref_summary = summarize(cand or [0.0]), summarize(ref or [0.0])
    return Check(metric=OFFERED_RATE_CHECK, unit="% of runs VALID", candidate=summary,
                 reference_mean=ref_summary.mean, reference=ref_summary,
                 difference_pct=summary.mean - ref_summary.mean, ci_pct=None, mdd_pct=None,
                 band=Band(lower_pct=0.0), verdict=verdict, reason=reason,
                 units=len(cand))

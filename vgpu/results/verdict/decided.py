"""One sentence per judged workload: what decided its verdict (the check and its numbers),
or, when undecided, what would decide it. The verdict table of the report and the last
lines of `vgpu bench` print it; the checks' full reasons stay in the detail beside them."""

from __future__ import annotations

from collections.abc import Sequence

from vgpu.results.verdict.compare import Check, Comparison

MAX_CLAUSE = 160  # a clause quoted from a reason longer than this is cut
# words that mark the clause of a reason saying what would decide it
_ADVICE = ("would decide", "raise ", "more repeats", "run both", "lower ", "--until-decided",
           "a finer resolution")
DEFAULT_ADVICE = "more repeats (`vgpu bench --until-decided`) would decide"


def _clauses(text: str) -> list[str]:
    return [c.strip() for c in text.replace(": ", "; ").split("; ") if c.strip()]


def _short(text: str) -> str:
    return text if len(text) <= MAX_CLAUSE else text[:MAX_CLAUSE - 3].rstrip() + "..."


def advice(reason: str) -> str:
    """The clause of ``reason`` that says what would decide it (its last such clause), or
    the default: more repeats."""
    found = [c for c in _clauses(reason) if any(a in c for a in _ADVICE)]
    return _short(found[-1]) if found else DEFAULT_ADVICE


def measured(check: Check) -> str:
    """The check's estimate and interval, or the first clause of its reason (a gate)."""
    if check.ci_pct is None:
        first = _clauses(check.reason)
        return _short(first[0]) if first else f"{check.difference_pct:+.1f}%"
    low, high = check.ci_pct
    return f"{check.difference_pct:+.1f}% [{low:+.1f}%, {high:+.1f}%]"


def _allowed(check: Check) -> str:
    band = check.band
    if band.lower_pct is None and band.upper_pct is None:
        return ""
    return f", allowed {band.describe()}"


def _first(checks: Sequence[Check], verdict: str) -> Check | None:
    return next((c for c in checks if c.verdict == verdict), None)


def decided_by(comparison: Comparison) -> str:
    """The one sentence of ``comparison``'s verdict (see the module)."""
    checks = comparison.checks
    if comparison.disturbed:
        return f"not judged: {_short(_clauses(comparison.disturbed[0])[0])}"
    failed = _first(checks, "FAIL")
    if failed is not None:
        return (f"{failed.metric} FAIL: {measured(failed)}{_allowed(failed)}"
                f"{_others(checks, 'FAIL')}")
    undecided = _first(checks, "INCONCLUSIVE")
    if undecided is not None:
        return (f"{undecided.metric} undecided: {measured(undecided)}{_allowed(undecided)}; "
                f"{advice(undecided.reason)}")
    if comparison.shortfalls:
        return f"too few VALID repeats: {_short(_clauses(comparison.shortfalls[0])[0])}"
    if not checks:
        return "no check could be made"
    headline = next((c for c in checks if c.ci_pct is not None), checks[0])
    return (f"{headline.metric} {measured(headline)}{_allowed(headline)}; all "
            f"{len(checks)} check{'s' if len(checks) > 1 else ''} PASS")


def _others(checks: Sequence[Check], verdict: str) -> str:
    more = sum(c.verdict == verdict for c in checks) - 1
    return f" (and {more} more {verdict})" if more > 0 else ""

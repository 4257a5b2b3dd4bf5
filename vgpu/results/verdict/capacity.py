"""The LLM serving verdict, VM against bare metal, on capacity at the latency SLO (what
MLPerf Inference's Server scenario reports) rather than tokens/s at a fixed offered rate,
which any slice that keeps up matches. Three checks:

- capacity: the ratio of the VM's capacity to bare metal's, repeats paired by seed (the
  same arrival pattern on both sides). A search knows its capacity only within its final
  bracket (the highest rate VALID every time it ran, the lowest INVALID rate above it), so
  the interval (``bracket_interval``) is the t interval of the repeats' bracket centres,
  never narrower than the searches resolved; PASS when the whole interval
  is above ``1 - capacity_pct``, FAIL when it is wholly below, else INCONCLUSIVE.
- matched load: the VM run at bare metal's capacity rate must be VALID; the VM INVALID
  where bare metal is VALID is FAIL.
- inter-token latency p99 at that load: may not rise more than ``itl_pct`` over bare
  metal's, and mean time per output token, shown beside it, not more than ``tpot_pct``
  (a periodic stall shows in the first, while the mean hides it).

Inputs are the JSON that ``python -m loadgen.llm.capacity`` writes (a search per repeat,
or with ``--at-qps`` one matched run per repeat)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean, stdev
from typing import Any

from vgpu.results.stats.intervals import t_quantile

CONFIDENCE = 0.95


@dataclass(frozen=True)
class CapacityCheck:
    name: str
    passed: bool
    detail: str
    verdict: str | None = None  # INCONCLUSIVE where neither PASS nor FAIL is supported

    @property
    def outcome(self) -> str:
        return self.verdict or ("PASS" if self.passed else "FAIL")


@dataclass(frozen=True)
class RatioInterval:
    """VM over bare metal: the estimate and its interval (``low``, ``high``);
    ``resolution_pct``: the searches' brackets' mean half-width (log percent), the least
    half-width the interval has; ``spread``: how its half-width was made."""

    ratio: float
    low: float
    high: float
    repeats: int
    resolution_pct: float = 0.0
    spread: str = ""

    def verdict(self, line: float) -> str:
        """PASS when the whole interval is at or above ``line``, FAIL when it is wholly
        below, else INCONCLUSIVE."""
        return "PASS" if self.low >= line else "FAIL" if self.high < line \
            else "INCONCLUSIVE"


@dataclass(frozen=True)
class Bracket:
    """Where a search's capacity lies: at least ``low`` (VALID every time it ran), below
    ``high`` (INVALID at least once; equal to ``low`` when unknown)."""

    low: float
    high: float


@dataclass(frozen=True)
class LlmVerdict:
    capacity: RatioInterval
    checks: list[CapacityCheck]

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def verdict(self) -> str:
        outcomes = {c.outcome for c in self.checks}
        return "FAIL" if "FAIL" in outcomes else \
            "INCONCLUSIVE" if "INCONCLUSIVE" in outcomes else "PASS"

    def lines(self) -> list[str]:
        return [f"{c.name}: {c.detail} ({c.outcome})" for c in self.checks]


def bracket_interval(vm: Sequence[Bracket], bare: Sequence[Bracket],
                     confidence: float = CONFIDENCE) -> RatioInterval:
    """VM over bare metal from brackets paired by repeat, on the log scale. Per repeat
    the ratio lies between ``vm.low / bare.high`` and ``vm.high / bare.low``; the estimate
    is the mean of these ranges' centres. With 3 or more repeats the half-width is the t
    interval of the centres, never less than the ranges' mean half-width (what the
    searches resolved): each centre's error from its search's bracket is part of the
    centres' spread already (the brackets fall differently in every repeat), so adding
    the half-width on top would count it twice; the floor only holds where the repeats
    agree more closely than their searches could tell (every search on the same grid
    point). With 2 repeats the half-width is the ranges' mean half-width plus half the
    centres' range, so that the interval is the hull of the two repeats' ranges (a t
    interval on one degree of freedom is 6.4 times the range and could never decide);
    with 1, the range alone."""
    if len(vm) != len(bare) or not vm:
        raise ValueError(f"capacity repeats must pair up: {len(vm)} VM, {len(bare)} bare "
                         "metal; run both sides with the same --repeats and --seed")
    if min(b.low for b in (*vm, *bare)) <= 0:
        raise ValueError("a repeat found no VALID rate (capacity 0): lower --start-qps or "
                         "loosen the SLO")
    lows = [math.log(v.low / b.high) for v, b in zip(vm, bare, strict=True)]
    highs = [math.log(v.high / b.low) for v, b in zip(vm, bare, strict=True)]
    centres = [(lo + hi) / 2 for lo, hi in zip(lows, highs, strict=True)]
    resolution = fmean((hi - lo) / 2 for lo, hi in zip(lows, highs, strict=True))
    n = len(centres)
    if n >= 3:
        spread = t_quantile(0.5 + confidence / 2, n - 1) * stdev(centres) / math.sqrt(n)
        half = max(spread, resolution)
        how = (f"{confidence:.0%} t interval of {n} repeats" if spread >= resolution else
               f"the brackets' half-width: the {confidence:.0%} t interval of {n} repeats "
               f"is narrower (+/-{100 * spread:.1f}%)")
    elif n == 2:
        half = resolution + (max(centres) - min(centres)) / 2
        how = "the hull of the 2 repeats' ranges"
    else:
        half, how = resolution, "1 repeat's range, no spread"
    centre = fmean(centres)
    return RatioInterval(math.exp(centre), math.exp(centre - half), math.exp(centre + half),
                         n, 100 * resolution, how)


def ratio_interval(vm: Sequence[float], bare: Sequence[float],
                   confidence: float = CONFIDENCE) -> RatioInterval:
    """:func:`bracket_interval` of capacities known exactly (brackets of no width)."""
    return bracket_interval([Bracket(v, v) for v in vm], [Bracket(b, b) for b in bare],
                            confidence)


class CapacityFileError(ValueError):
    """A capacity file that is not what ``python -m loadgen.llm.capacity`` writes."""

    def __init__(self, path: Path, field: str, message: str, fix: str) -> None:
        super().__init__(f"{path}: {field}: {message}")
        self.path, self.field, self.message, self.fix = path, field, message, fix


def load_capacity_file(path: Path, matched: bool) -> dict[str, Any]:
    """A search's JSON (``matched``: a ``--matched-to`` run's), its repeats checked."""
    key = "matched" if matched else "capacity_qps"
    how = ("python -m loadgen.llm.capacity ... --matched-to BARE.json" if matched
           else "python -m loadgen.llm.capacity ... without --matched-to")
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CapacityFileError(path, "(file)", f"cannot be read as JSON: {exc}",
                                f"give the file {how} wrote") from exc
    repeats = doc.get("repeats") if isinstance(doc, dict) else None
    if not isinstance(repeats, list) or not repeats:
        raise CapacityFileError(path, "repeats", "a non-empty list is required",
                                f"give the file {how} wrote")
    for i, repeat in enumerate(repeats):
        if not isinstance(repeat, dict) or key not in repeat:
            raise CapacityFileError(path, f"repeats[{i}].{key}", "is missing",
                                    f"give the file {how} wrote")
    return doc


SETUP_FIELDS = ("seed", "slo_ms", "shape")  # what both sides must share to be compared


def _check_same_setup(bare: Mapping[str, Any], others: Mapping[str, Mapping[str, Any]]) -> None:
    """Both sides must have sent the same seeded load against the same SLO."""
    for name, other in others.items():
        for key in SETUP_FIELDS:
            if key in bare and key in other and bare[key] != other[key]:
                raise ValueError(f"the {name} used {key} {other[key]}, bare metal's search "
                                 f"{bare[key]}: the sides did not send the same load")


def search_bracket(repeat: Mapping[str, Any]) -> Bracket:
    """A stored search's bracket: its capacity and the lowest rate above it that was
    INVALID at least once (the capacity itself when no such run is stored)."""
    low = float(repeat["capacity_qps"])
    above = [float(r["rate"]) for r in repeat.get("runs", [])
             if not r["valid"] and float(r["rate"]) > low]
    return Bracket(low, min(above, default=low))


def _brackets(search: Mapping[str, Any]) -> list[Bracket]:
    return [search_bracket(r) for r in search["repeats"]]


def _matched_runs(search: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [r["matched"] for r in search["repeats"]]


def _confirming_runs(search: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Per repeat, bare metal's last VALID run at its capacity (the rerun when it was
    VALID)."""
    out = []
    for repeat in search["repeats"]:
        at = [r for r in repeat["runs"] if r["valid"] and r["rate"] == repeat["capacity_qps"]]
        if not at:
            raise ValueError(f"repeat {repeat['repeat']} has no VALID run at its capacity")
        out.append(at[-1])
    return out


def _mean(runs: Sequence[Mapping[str, Any]], key: str) -> float | None:
    values = [float(r[key]) for r in runs if r.get(key) is not None]
    return fmean(values) if values else None


def _rise_check(name: str, vm: float | None, bare: float | None, pct: float) -> CapacityCheck:
    if vm is None or bare is None:
        return CapacityCheck(name, False, "not measured on both sides")
    rise = (vm / bare - 1) * 100
    return CapacityCheck(name, rise <= pct, f"VM {vm:.2f} ms vs bare metal {bare:.2f} ms "
                         f"({rise:+.1f}%, allowed +{pct:g}%)")


def judge_capacity(bare: Mapping[str, Any], vm: Mapping[str, Any],
                   vm_matched: Mapping[str, Any], *, capacity_pct: float = 3.0,
                   itl_pct: float = 5.0, tpot_pct: float = 5.0) -> LlmVerdict:
    """The verdict from bare metal's and the VM's capacity searches and the VM's runs at
    bare metal's capacity (``vm_matched``)."""
    _check_same_setup(bare, {"VM search": vm, "VM matched runs": vm_matched})
    interval = bracket_interval(_brackets(vm), _brackets(bare))
    unconfirmed = sum(1 for side in (bare, vm) for r in side["repeats"]
                      if not r.get("confirmed", True))
    outcome = interval.verdict(1 - capacity_pct / 100)
    checks = [CapacityCheck(
        "capacity_at_slo", outcome == "PASS",
        f"VM/bare metal {interval.ratio:.3f} [{interval.low:.3f}, {interval.high:.3f}] "
        f"over {interval.repeats} repeats ({interval.spread}; the searches' brackets "
        f"+/-{interval.resolution_pct:.1f}%)"
        f"{f', {unconfirmed} capacities unconfirmed by their rerun' if unconfirmed else ''}"
        f", allowed -{capacity_pct:g}%", outcome)]
    reference = _confirming_runs(bare)
    matched = _matched_runs(vm_matched)
    invalid = [r for r in matched if not r["valid"]]
    checks.append(CapacityCheck(
        "valid_at_bare_metal_capacity", not invalid,
        f"{len(matched) - len(invalid)}/{len(matched)} VM runs VALID at bare metal's "
        f"capacity" + (f"; {invalid[0]['reasons'][0]}" if invalid else "")))
    checks.append(_rise_check("inter_token_latency_p99_at_matched_load",
                              _mean(matched, "itl_p99_ms"), _mean(reference, "itl_p99_ms"),
                              itl_pct))
    checks.append(_rise_check("time_per_output_token_mean_at_matched_load",
                              _mean(matched, "tpot_mean_ms"),
                              _mean(reference, "tpot_mean_ms"), tpot_pct))
    return LlmVerdict(interval, checks)

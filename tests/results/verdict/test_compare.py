from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema
from hypothesis import given
from hypothesis import strategies as st

from vgpu.results.export.junit import to_junit_xml, write_junit
from vgpu.results.verdict.compare import (
    Band,
    Comparison,
    Reference,
    band_for,
    check_reference,
    compare_paired,
    compare_samples,
    crossover,
    overall_verdict,
)

SCHEMA = xmlschema.XMLSchema(Path(__file__).parents[1] / "junit.xsd")
THROUGHPUT_BAND = band_for(higher_is_better=True, tolerance=0.02)
LATENCY_BAND = band_for(higher_is_better=False, tolerance=0.02)


def test_vm_within_tolerance_of_bare_metal_passes() -> None:
    check = compare_samples(
        "system_throughput", [995.0, 996.0, 997.0], [1000.0, 1001.0, 999.0], THROUGHPUT_BAND
    )
    assert check.verdict == "PASS"
    assert check.difference_pct == pytest.approx(-0.4, abs=1e-9)
    assert check.ratio == pytest.approx(0.996)
    assert check.ci_pct is not None
    assert -2.0 < check.ci_pct[0] < check.difference_pct < check.ci_pct[1]


def test_vm_clearly_slower_than_tolerance_fails() -> None:
    check = compare_samples(
        "system_throughput", [900.0, 901.0, 899.0], [1000.0, 1001.0, 999.0], THROUGHPUT_BAND
    )
    assert check.verdict == "FAIL"
    assert check.difference_pct == pytest.approx(-10.0)
    assert check.ci_pct is not None and check.ci_pct[1] < -2.0


def test_noisy_measurement_is_inconclusive() -> None:
    # mean -1% but the noise spreads the interval across the -2% limit
    check = compare_samples(
        "system_throughput", [930.0, 1050.0, 990.0], [1000.0, 1001.0, 999.0], THROUGHPUT_BAND
    )
    assert check.verdict == "INCONCLUSIVE"
    assert check.ci_pct is not None and check.ci_pct[0] < -2.0 < check.ci_pct[1]
    assert check.mdd_pct is not None and check.mdd_pct > 2.0
    assert "repeats in all" in check.reason and "would decide" in check.reason


def test_one_repeat_is_inconclusive() -> None:
    check = compare_samples("system_throughput", [1000.0], [1000.0, 1001.0], THROUGHPUT_BAND)
    assert check.verdict == "INCONCLUSIVE"
    assert check.ci_pct is None
    assert "fewer than 2 repeats" in check.reason


def test_latency_is_judged_against_an_upper_bound() -> None:
    faster = compare_samples("p99", [9.0, 9.1, 9.05], [10.0, 10.1, 10.05], LATENCY_BAND)
    slower = compare_samples("p99", [12.0, 12.1, 12.05], [10.0, 10.1, 10.05], LATENCY_BAND)
    assert (faster.verdict, slower.verdict) == ("PASS", "FAIL")


def test_scenario_gain_against_a_required_minimum() -> None:
    six = [1058.0, 1057.0, 1059.0]
    one = [1000.0, 1001.0, 999.0]
    at_least_5pct = compare_samples("system_throughput", six, one, Band(lower_pct=5.0))
    at_least_10pct = compare_samples("system_throughput", six, one, Band(lower_pct=10.0))
    assert at_least_5pct.difference_pct == pytest.approx(5.8, abs=1e-9)
    assert (at_least_5pct.verdict, at_least_10pct.verdict) == ("PASS", "FAIL")


def test_reference_values_with_lower_and_upper_bounds() -> None:
    reference = Reference(value=1000.0, lower=-0.05, upper=0.10, unit="samples/s")
    inside = check_reference("throughput", [990.0, 991.0, 989.0], reference)
    too_low = check_reference("throughput", [900.0, 901.0, 899.0], reference)
    too_high = check_reference("throughput", [1200.0, 1201.0, 1199.0], reference)
    straddling = check_reference("throughput", [900.0, 1000.0, 950.0], reference)
    assert inside.verdict == "PASS"
    assert inside.difference_pct == pytest.approx(-1.0)
    assert (too_low.verdict, too_high.verdict, straddling.verdict) == (
        "FAIL", "FAIL", "INCONCLUSIVE"
    )


def test_overall_verdict_takes_the_worst() -> None:
    ok = compare_samples("a", [1.0, 1.001, 0.999], [1.0, 1.001, 0.999], THROUGHPUT_BAND)
    bad = compare_samples("b", [0.5, 0.51, 0.49], [1.0, 1.01, 0.99], THROUGHPUT_BAND)
    unsure = compare_samples("c", [1.0], [1.0, 1.01], THROUGHPUT_BAND)
    assert overall_verdict([ok]) == "PASS"
    assert overall_verdict([ok, unsure]) == "INCONCLUSIVE"
    assert overall_verdict([ok, unsure, bad]) == "FAIL"
    assert overall_verdict([]) == "INCONCLUSIVE"


def _comparison() -> Comparison:
    return Comparison(
        kind="vm-vs-bare-metal", title="resnet50: VM vs bare metal, scenario 6",
        candidate="vm", reference="bare metal",
        checks=[
            compare_samples("pass", [995.0, 996.0, 997.0], [1000.0, 1001.0, 999.0],
                            THROUGHPUT_BAND),
            compare_samples("fail", [900.0, 901.0, 899.0], [1000.0, 1001.0, 999.0],
                            THROUGHPUT_BAND),
            compare_samples("unsure", [930.0, 1050.0, 990.0], [1000.0, 1001.0, 999.0],
                            THROUGHPUT_BAND),
        ],
    )


def test_junit_xml_is_valid_against_the_schema_and_maps_verdicts(tmp_path: Path) -> None:
    path = tmp_path / "verdict.xml"
    write_junit([_comparison()], path)
    SCHEMA.validate(str(path))
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "1", "1")
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert cases["pass"].find("failure") is None and cases["pass"].find("skipped") is None
    failure = cases["fail"].find("failure")
    assert failure is not None and "-10.00%" in (failure.get("message") or "")
    assert cases["unsure"].find("skipped") is not None


def test_the_schema_rejects_a_malformed_report() -> None:
    broken = to_junit_xml([_comparison()]).replace('tests="3"', 'tests="three"')
    assert not SCHEMA.is_valid(broken)


def test_a_collapse_is_never_reported_below_minus_100_percent() -> None:
    check = compare_samples("system_throughput", [50.0, 300.0, 20.0],
                            [1000.0, 1001.0, 999.0], THROUGHPUT_BAND)
    assert check.ci_pct is not None and -100.0 < check.ci_pct[0] < check.ci_pct[1]
    assert check.difference_pct == pytest.approx((check.candidate.mean / 1000.0 - 1) * 100)


@given(st.lists(st.floats(1.0, 1e6), min_size=2, max_size=8),
       st.lists(st.floats(1.0, 1e6), min_size=2, max_size=8))
def test_intervals_stay_above_minus_100_percent_and_hold_the_estimate(
        candidate: list[float], reference: list[float]) -> None:
    check = compare_samples("t", candidate, reference, THROUGHPUT_BAND)
    assert check.ci_pct is not None
    low, high = check.ci_pct
    assert -100.0 <= low <= check.difference_pct <= high


def test_the_reference_mean_is_not_taken_as_exact() -> None:
    """Same candidate, same reference mean: a noisier reference widens the interval."""
    candidate = [990.0, 991.0, 989.0]
    quiet = compare_samples("t", candidate, [1000.0, 1000.5, 999.5], THROUGHPUT_BAND)
    noisy = compare_samples("t", candidate, [1000.0, 1030.0, 970.0], THROUGHPUT_BAND)
    assert quiet.ci_pct is not None and noisy.ci_pct is not None
    assert noisy.ci_pct[1] - noisy.ci_pct[0] > 5 * (quiet.ci_pct[1] - quiet.ci_pct[0])


def test_a_period_effect_falls_out_of_the_crossover_analysis() -> None:
    """ABBA blocks where whichever side runs second is 3% slower: the crossover estimate
    is the true -0.5% with a tight interval; a plain paired mean carries the +-3% swing
    in its spread."""
    blocks = range(8)
    reference, candidate = [], []
    for block in blocks:
        noise = 1.0 + 0.001 * ((block * 7) % 3 - 1)
        ref_second, cand_second = block % 2 == 1, block % 2 == 0
        reference.append(1000.0 * (0.97 if ref_second else 1.0))
        candidate.append(995.0 * noise * (0.97 if cand_second else 1.0))
    crossed = compare_paired("t", candidate, reference, THROUGHPUT_BAND, blocks=list(blocks))
    assert crossed.df == 6 and crossed.verdict == "PASS"
    assert crossed.difference_pct == pytest.approx(-0.5, abs=0.1)
    ratios = [100 * math.log(c / r) for c, r in zip(candidate, reference, strict=True)]
    plain = crossover(ratios, None)
    assert plain is not None and plain[1] > 100 * (crossed.se_pct or 0) ** 2


def test_an_undecided_check_says_how_many_blocks_would_decide() -> None:
    reference = [1000.0, 1004.0, 996.0, 1002.0]
    candidate = [985.0, 1004.0, 1001.0, 990.0]
    check = compare_paired("t", candidate, reference, THROUGHPUT_BAND)
    assert check.verdict == "INCONCLUSIVE"
    assert "blocks in all" in check.reason and "more) would decide" in check.reason

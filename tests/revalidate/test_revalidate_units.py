"""The revalidation's pure parts: one verdict from two comparisons and the accuracy gate,
the exit code, and the progress file --resume reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vgpu.errors import InputError
from vgpu.results.stats.intervals import summarize
from vgpu.results.verdict.compare import Band, Check, Comparison
from vgpu.revalidate import state
from vgpu.revalidate.verdicts import WorkloadVerdict, exit_code


def _check(verdict: str, metric: str = "system_throughput") -> Check:
    return Check(metric=metric, unit="samples/s", candidate=summarize([1.0, 1.0]),
                 reference_mean=1.0, reference=None, difference_pct=0.0, ci_pct=None,
                 mdd_pct=None, band=Band(lower_pct=-2.0), verdict=verdict,  # type: ignore[arg-type]
                 reason="")


def _comparison(verdict: str) -> Comparison:
    return Comparison(kind="run-vs-baseline", title="t", candidate="c", reference="r",
                      checks=[_check(verdict)])


@pytest.mark.parametrize(("bare_metal", "baseline", "accuracy", "expected"), [
    ("PASS", "PASS", None, "PASS"),
    ("PASS", "FAIL", None, "FAIL"),
    ("INCONCLUSIVE", "PASS", None, "INCONCLUSIVE"),
    ("PASS", None, "FAIL", "FAIL"),
    (None, None, None, None),
    (None, None, "PASS", "PASS"),
])
def test_one_verdict_from_both_comparisons_and_the_gate(
    bare_metal: str | None, baseline: str | None, accuracy: str | None, expected: str | None,
) -> None:
    verdict = WorkloadVerdict(
        "6", "resnet50-offline", "s", None if bare_metal is None else _comparison(bare_metal),
        None if baseline is None else _comparison(baseline),
        None if accuracy is None else _check(accuracy, "accuracy"))
    assert verdict.verdict == expected


def test_exit_codes() -> None:
    passed = WorkloadVerdict("6", "w", "s", _comparison("PASS"), None)
    failed = WorkloadVerdict("7", "w", "s", _comparison("FAIL"), None)
    unsure = WorkloadVerdict("8", "w", "s", _comparison("INCONCLUSIVE"), None)
    unjudged = WorkloadVerdict("9", "w", "s", None, None)
    assert exit_code([passed, passed], {}) == 0
    assert exit_code([passed, unsure], {}) == 4  # undecided is no pass
    assert exit_code([unjudged], {}) == 5  # nothing to judge against
    assert exit_code([passed, unjudged], {}) == 4
    assert exit_code([passed], {"8": "gone"}) == 1
    assert exit_code([passed, failed], {"8": "gone"}) == 3


def test_a_pinned_host_is_judged_against_its_own_baseline_or_not_at_all() -> None:
    """With --host, bare metal alone never passes an upgraded host; a FAIL still stands."""
    bare_metal_only = WorkloadVerdict("6", "w", "s", _comparison("PASS"), None)
    both = WorkloadVerdict("6", "w", "s", _comparison("PASS"), _comparison("PASS"))
    failed = WorkloadVerdict("6", "w", "s", _comparison("FAIL"), None)
    assert exit_code([bare_metal_only], {}, needs_baseline=True) == 5
    assert exit_code([bare_metal_only], {}, needs_baseline=False) == 0
    assert exit_code([both], {}, needs_baseline=True) == 0
    assert exit_code([failed], {}, needs_baseline=True) == 3


def test_resume_refuses_another_hosts_unfinished_run(tmp_path: Path) -> None:
    lab = tmp_path / "lab.yaml"
    h1 = state.RunKey(host="H1", recorded="pre-upgrade@H1", judged="pre-upgrade@H1")
    started = state.start(tmp_path, lab, "pre-upgrade", ["6"], h1)
    found = state.unfinished(tmp_path, lab)
    assert found is not None and found.key == h1  # the key survives the file
    state.refuse_other_run(found, h1)  # the same run resumes
    h2 = state.RunKey(host="H2", recorded="pre-upgrade@H2", judged="pre-upgrade@H2")
    with pytest.raises(InputError) as refused:
        state.refuse_other_run(found, h2)
    text = str(refused.value)
    assert f"the unfinished revalidation {started.id} is host H1" in text
    assert "this one is host H2" in text and "--host H1" in text


def test_resume_finds_the_newest_unfinished_revalidation_of_this_inventory(
    tmp_path: Path,
) -> None:
    lab, other = tmp_path / "lab.yaml", tmp_path / "other.yaml"
    older = state.start(tmp_path, lab, "pre-upgrade", ["6"])
    newer = state.start(tmp_path, lab, "pre-upgrade", ["6", "8"])  # same second: -2 file
    state.start(tmp_path, other, "pre-upgrade", ["1"])
    older.started_at, newer.started_at = 100.0, 200.0
    older.save()
    newer.progress("6").status = "done"
    newer.save()
    found = state.unfinished(tmp_path, lab)
    assert found is not None and found.id == newer.id
    assert found.progress("6").status == "done" and found.progress("8").status == "pending"
    found.finished = True
    found.save()
    assert state.unfinished(tmp_path, lab) is None  # the newest one finished


def test_a_broken_progress_file_is_an_input_error_naming_it(tmp_path: Path) -> None:
    broken = tmp_path / "revalidate-20260101T000000Z.json"
    broken.write_text(json.dumps({"inventory": "x"}))
    with pytest.raises(InputError) as raised:
        state.unfinished(tmp_path, tmp_path / "lab.yaml")
    assert str(broken) in str(raised.value) and "without --resume" in str(raised.value)

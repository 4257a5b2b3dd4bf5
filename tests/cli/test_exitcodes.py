"""The exit codes the judging commands share."""

import pytest

from vgpu.exitcodes import (
    EXIT_FAIL,
    EXIT_INCONCLUSIVE,
    EXIT_NO_REFERENCE,
    EXIT_PASS,
    exit_for,
    overall_verdict,
)


@pytest.mark.parametrize(("verdicts", "overall"), [
    (["PASS", "PASS"], "PASS"),
    (["PASS", "FAIL", "INCONCLUSIVE"], "FAIL"),
    (["PASS", "INCONCLUSIVE"], "INCONCLUSIVE"),
    (["PASS", None], "INCONCLUSIVE"),  # a workload left unjudged is no PASS
    ([None, None], None),
    ([], None),
])
def test_overall_verdict(verdicts: list[str | None], overall: str | None) -> None:
    assert overall_verdict(verdicts) == overall


def test_exit_for_each_verdict() -> None:
    assert [exit_for(v) for v in ("PASS", "FAIL", "INCONCLUSIVE", None)] == [
        EXIT_PASS, EXIT_FAIL, EXIT_INCONCLUSIVE, EXIT_NO_REFERENCE] == [0, 3, 4, 5]

"""The time plan an interleaved workload states before its first judged block (pure): the
minutes to each look from the measured warm-ups, the worst case, and the check at the end
that says whether the series kept to it."""

from __future__ import annotations

import pytest

from vgpu.bench.timeplan import job_outline, plan_blocks

LOOKS = (4, 10, 16, 22, 28, 34, 40)


def test_the_plan_times_every_look_from_the_warm_ups() -> None:
    plan = plan_blocks("resnet50-offline", LOOKS, [14.0, 16.0], "one 10 s run",
                       replaceable=3)
    assert plan.block_s == 30.0
    assert [plan.seconds_to(n) for n in (4, 10, 40)] == [120.0, 300.0, 1200.0]
    assert plan.worst_blocks == 43 and plan.worst_s == pytest.approx(1290.0)
    text = plan.describe()
    assert "one 10 s run a side" in text and "4 (2.0 min), 10 (5.0 min)" in text
    assert "worst case 21.5 min (40 blocks undecided + 3 set aside)" in text


def test_the_end_says_whether_the_series_kept_to_the_plan() -> None:
    plan = plan_blocks("bert-offline", LOOKS, [20.0, 20.0], "one 10 s run", replaceable=3)
    kept = plan.kept(10, 410.0)
    assert kept.startswith("time: 10 blocks in 6.8 min (planned 6.7 min for 10 blocks")
    assert kept.endswith("within the plan")
    over = plan.kept(43, 2400.0)  # a machine slower than its warm-ups showed
    assert "OVER the plan's worst case by 11.3 min" in over


def test_a_fixed_run_count_is_one_look() -> None:
    plan = plan_blocks("llm-server", (4,), [30.0, 30.0], "one capacity search per instance",
                       replaceable=0)
    assert plan.worst_s == 240.0
    assert plan.describe().startswith("time plan: blocks of one capacity search per "
                                      "instance a side")
    assert plan.describe().endswith("worst case 4.0 min (4 blocks undecided)")


def test_the_job_outline_names_each_workload_s_looks() -> None:
    text = job_outline({"resnet50-offline": LOOKS, "llm-server": (4, 6)}, "a run lasts 5 s")
    assert text.startswith("time plan: 2 workload(s)")
    assert "resnet50-offline after 4, 10, 16, 22, 28, 34, 40 blocks" in text
    assert "llm-server after 4, 6 blocks" in text and "a run lasts 5 s" in text

"""The LLM capacity searches the capacity tests share: the load shape, the slice simulator's
profile, the SLO, the stated margin and the search budget
(tests/results/verdict/test_capacity_*)."""

from __future__ import annotations

from loadgen.llm.runs import Budget, LoadShape, Slo
from loadgen.llm.slice_engine import SliceProfile

SHAPE = LoadShape(16, 48, 16)
# tests/bench/test_llm_capacity_bench.py's slice: a TPOT target on 10 ms steps that grow
# with the batch's context; capacity 53-58/s
PROFILE = SliceProfile(step_ms=10.0, context_us=12.0)
SLO = Slo(300.0, 20.0)
# the stated capacity margin, and a resolution well below it (the brackets widen the
# interval, not the margin)
MARGIN_PCT = 5.0
BUDGET = Budget(runs=11, min_queries=100, duration_s=1.0, resolution=0.01)
# from half the capacity: the search's doubling leaves a rate below both knees, where the
# latency checks compare (at a knee, latency is the knee's queueing)
START_QPS = 25.0

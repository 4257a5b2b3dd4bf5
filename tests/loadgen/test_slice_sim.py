"""The slice simulator (a stand-in for a GPU slice serving an LLM): its engine's step
times, batching, KV-pool preemption and stalls on a virtual clock, and its server on the
loopback interface."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from loadgen.llm.open_loop import EndpointClient, endpoint_run
from loadgen.llm.runs import Budget, LoadShape, Slo
from loadgen.llm.slice_engine import (
    Arrival,
    BatchEngine,
    SimSequence,
    SliceProfile,
    simulate,
    simulated_run,
)
from loadgen.llm.slice_sim import SliceSimulator


def test_step_time_is_fixed_plus_prefill_plus_context() -> None:
    profile = SliceProfile(step_ms=2.0, prefill_us=10.0, context_us=1.0)
    engine = BatchEngine(profile)
    engine.add(SimSequence(prompt_tokens=100, max_tokens=3))
    first = engine.step()  # prefill of 100 tokens, context 101 after the first token
    assert first.seconds == pytest.approx((2.0 + 1.0 + 0.100) / 1e3)
    second = engine.step()
    assert second.seconds == pytest.approx((2.0 + 0.101) / 1e3)


def test_a_batch_slot_limit_queues_and_tokens_arrive_once_per_step() -> None:
    profile = SliceProfile(step_ms=10.0, max_num_seqs=1)
    times = simulate(profile, [Arrival(0.0, 8, 3), Arrival(0.0, 8, 2)])
    assert times[0] == pytest.approx([0.01, 0.02, 0.03])
    assert times[1] == pytest.approx([0.04, 0.05])


def test_a_full_kv_pool_preempts_the_newest_sequence() -> None:
    engine = BatchEngine(SliceProfile(kv_tokens=22))
    old, new = SimSequence(10, 5), SimSequence(10, 5)
    engine.add(old)
    engine.add(new)
    engine.step()  # both admitted: 11 + 11 tokens
    engine.step()  # each needs one more: the newest gives its place back
    assert engine.preemptions == 1 and new.preemptions == 1
    assert engine.running == [old] and list(engine.waiting) == [new]


def test_periodic_stalls_lengthen_one_step_in_each_period() -> None:
    profile = SliceProfile(step_ms=10.0, stall_every_ms=50.0, stall_ms=5.0)
    times = simulate(profile, [Arrival(0.0, 4, 12)])[0]
    gaps = [round((b - a) * 1e3, 6) for a, b in itertools.pairwise(times)]
    assert gaps.count(15.0) == 2 and gaps.count(10.0) == 9


def test_the_server_streams_what_the_virtual_clock_predicts() -> None:
    """Below the knee, the loopback server's TPOT is the engine's, within a few percent;
    a 5 ms stall every 200 ms shows in ITL p99 and barely in the mean TPOT."""
    profile = SliceProfile(step_ms=8.0, context_us=16.0)
    shape, slo = LoadShape(), Slo(ttft_ms=200.0, tpot_ms=16.0)
    budget = Budget(min_queries=40, duration_s=1.0)
    with SliceSimulator(profile) as sim:
        measured = endpoint_run(EndpointClient(sim.url, "sim"), 20.0, 0, shape, slo, 0, 0,
                                budget)
    known = simulated_run(profile, 20.0, shape, slo, 0, 0, budget)
    assert measured.valid and measured.failed == 0 and measured.queries == 40
    assert measured.output_tokens == 40 * shape.output_tokens
    # the wall clock adds the shared cores' delays to every step: a few percent at most
    assert measured.tpot_mean_ms == pytest.approx(known.tpot_mean_ms, rel=0.08)
    stalled = simulated_run(replace(profile, stall_every_ms=200.0, stall_ms=5.0), 20.0,
                            shape, slo, 0, 0, budget)
    assert stalled.itl_p99_ms > known.itl_p99_ms + 3.0
    assert stalled.tpot_mean_ms < known.tpot_mean_ms * 1.05


def test_an_error_event_fails_its_query_and_the_run() -> None:
    profile = SliceProfile(step_ms=2.0, error_every=10)
    budget = Budget(min_queries=30, duration_s=0.5)
    with SliceSimulator(profile) as sim:
        run = endpoint_run(EndpointClient(sim.url, "sim"), 60.0, 0, LoadShape(),
                           Slo(ttft_ms=500.0, tpot_ms=50.0), 0, 0, budget)
    assert run.failed == 3 and not run.valid
    assert "the server sent an error event: simulated engine error" in run.reasons[0]
    assert run.output_tokens == 27 * 16

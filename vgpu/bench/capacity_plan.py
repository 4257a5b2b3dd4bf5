"""What a capacity-at-the-SLO workload will spend, said before it starts: a search per
instance in every run, at most ``runs`` runs of ``max(min_queries, rate x duration_s)``
queries each. Its blocks are fixed (the scenario's repeats, or --runs): the search is the
adaptive part, and more blocks planned from a noisy pilot would multiply a search's cost
(vgpu.bench.interleave)."""

from __future__ import annotations

from vgpu.bench.workload import EffectiveWorkload

# per run beyond its arrivals: the last answers and the next run's connections (measured
# on this project's 2-core machine: 2 s runs took 2.5-3.5 s)
RUN_OVERHEAD_S = 1.0
# per harness run: start, warm-up answers, the accuracy gate, the synchronised start
HARNESS_S = 6.0


def search_seconds(workload: EffectiveWorkload) -> float:
    """The most one search takes when every run's arrivals last ``duration_s`` (a run
    at a rate below min_queries / duration_s lasts longer)."""
    assert workload.llm is not None and workload.llm.capacity is not None
    capacity = workload.llm.capacity
    return capacity.runs * (capacity.duration_s + RUN_OVERHEAD_S)


def plan_note(workload: EffectiveWorkload, blocks: int, sides: int = 2) -> str:
    """The budget and the expected time of ``blocks`` blocks of ``sides`` runs (the
    unjudged warm-up run of each side included)."""
    assert workload.llm is not None and workload.llm.capacity is not None
    capacity = workload.llm.capacity
    runs = (blocks + 1) * sides
    expected = runs * (search_seconds(workload) + HARNESS_S)
    return (f"capacity at the SLO: {blocks} blocks, fixed (a search is the adaptive part; "
            "--until-decided or --budget add blocks); "
            f"each run a search per instance of at most {capacity.runs} runs of "
            f"max({capacity.min_queries}, rate x {capacity.duration_s:g} s) queries from "
            f"{capacity.start_qps:g}/s to a {capacity.resolution * 100:g}% bracket; {runs} runs "
            f"(warm-ups included): about {expected / 60:.1f} min")

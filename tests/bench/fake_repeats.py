"""Stand-ins for a bench session's repeat and warm-up (vgpu.bench.session.run_repeat,
warm_up): each repeat stores the next throughput of its side as one VALID instance, so a
test knows the series a command judges; both write down what ran, in order."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from vgpu.bench import session
from vgpu.results.store.records import InstanceResult
from vgpu.results.store.result_store import ResultStore


def fake_repeats(order: list[tuple[str, int]], values: dict[str, Iterator[float]]) -> Any:
    """``run_repeat``: stores the next of ``values[scenario id]``; adds (scenario, repeat)
    to ``order``."""
    def run_repeat(store: ResultStore, scenario: Any, targets: Any, result: Any,
                   repeat: int, repeats: int, *_: Any) -> list[Any]:
        order.append((scenario.id, repeat))
        run_id = session._begin_run(store, scenario, targets, result, repeat, repeats)
        store.finish_run(run_id, "ok", instances=[InstanceResult(
            name="a", status="ok", device_kind="cpu", validity="VALID",
            throughput=next(values[scenario.id]))])
        return []
    return run_repeat


def fake_warm_up(order: list[tuple[str, int]]) -> Any:
    """``warm_up``: adds (scenario, -1) to ``order`` and reports the side warm."""
    def warm_up(store: Any, side: Any, result: Any, *_: Any) -> bool:
        order.append((side.scenario.id, -1))
        return True
    return warm_up

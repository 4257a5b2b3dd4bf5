"""Other load on a target's machine, from the harness records: instances on one machine
do not count each other as other processes."""

from __future__ import annotations

import pytest

from vgpu.bench.disturbance import other_cpu_share


def _load(busy: float, own: float, wall: float = 10.0, cpus: int = 2) -> dict[str, float]:
    return {"busy_cpu_s": busy, "own_cpu_s": own, "wall_s": wall, "cpus": cpus}


def test_sibling_instances_are_not_other_processes() -> None:
    # two instances, 9 s of CPU each, on a 2-core machine that was busy 19 s in 10 s
    siblings = [_load(19.0, 9.0), _load(19.0, 9.0)]
    assert other_cpu_share(siblings) == pytest.approx(0.05)
    # one instance alone would count its sibling as other
    assert other_cpu_share(siblings[:1]) == pytest.approx(0.5)


def test_a_hog_beside_one_instance() -> None:
    assert other_cpu_share([_load(18.0, 6.0)]) == pytest.approx(0.6)
    assert other_cpu_share([_load(5.0, 6.0)]) == 0.0  # never below zero
    assert other_cpu_share([]) == 0.0

"""Other load on a target's machine, from the harness records: instances on one machine
do not count each other as other processes; only hardware throttling disturbs a GPU, and a
disturbed run names the process that used its GPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vgpu.bench.disturbance import (
    HW_POWER_BRAKE,
    HW_SLOWDOWN,
    HW_THERMAL,
    disturbance_metrics,
    other_cpu_share,
)
from vgpu.bench.fanout import InstanceOutcome
from vgpu.remote.local import LocalTransport
from vgpu.results.store.disturbance import GPU_OTHER_PROCESS, GPU_THROTTLED, disturbance
from vgpu.results.store.records import Metric
from vgpu.targets.target import Target


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


MACHINE = LocalTransport()  # every instance below runs on this one machine


def _gpu_outcome(tmp_path: Path, throttle: int, seen: list[dict[str, Any]],
                 others: float = 0.0) -> InstanceOutcome:
    target = Target(instance="s6-7g", transport=MACHINE, harness="python -m loadgen",
                    work_root=str(tmp_path), device={"kind": "gpu"}, device_label="GPU 0",
                    target_kind="local")
    gpu = {"metrics": {"clocks_throttle_reasons": {"max": float(throttle)},
                       "other_processes": {"max": others}},
           "other_processes": {"seen": seen}}
    return InstanceOutcome(target=target, log_dir=tmp_path,
                           record={"telemetry": {"gpu": gpu}})


def _value(metrics: list[Metric], name: str) -> float | None:
    return next((m.value for m in metrics if m.name == name and m.instance is None), None)


@pytest.mark.usefixtures("judged_disturbance")
@pytest.mark.parametrize(("reason", "throttled"), [
    (0x0, 0.0), (0x1, 0.0),  # idle
    (0x2, 0.0),  # application clocks
    (0x4, 0.0),  # software power cap: slices sharing one power budget at full load
    (0x10 | 0x20, 0.0),  # sync boost, software thermal
    (HW_SLOWDOWN, 1.0), (HW_THERMAL, 1.0), (HW_POWER_BRAKE, 1.0),
    (0x4 | HW_THERMAL, 1.0),
])
def test_only_hardware_throttling_disturbs(tmp_path: Path, reason: int,
                                           throttled: float) -> None:
    metrics = disturbance_metrics([_gpu_outcome(tmp_path, reason, [])])
    assert _value(metrics, GPU_THROTTLED) == throttled
    assert (disturbance(3, metrics) is not None) == (throttled > 0)


@pytest.mark.usefixtures("judged_disturbance")
def test_a_disturbed_run_names_the_process(tmp_path: Path) -> None:
    seen = [{"pid": 4242, "command": "python train.py --epochs 90",
             "memory_bytes_max": 8 * 2**30, "sm_percent_max": 70.0}]
    metrics = disturbance_metrics([_gpu_outcome(tmp_path, 0, seen, others=1.0)])
    [pid] = [m for m in metrics if m.name == GPU_OTHER_PROCESS]
    assert (pid.value, pid.unit, pid.instance) == (4242.0, "python train.py --epochs 90",
                                                   "s6-7g")
    found = disturbance(3, metrics)
    assert found is not None and found.describe() == (
        "disturbed: 1 other process(es) ran on the GPU: pid 4242 (python train.py "
        "--epochs 90) on s6-7g's device during run 3")
    assert disturbance(3, disturbance_metrics([_gpu_outcome(tmp_path, 0, [])])) is None


@pytest.mark.usefixtures("judged_disturbance")
def test_sibling_instances_sharing_a_gpu_are_not_other_processes(tmp_path: Path) -> None:
    def instance(pid: int, sibling: int, stranger: bool) -> InstanceOutcome:
        seen = [{"pid": sibling, "command": "python -m loadgen run", "memory_bytes_max": 9e9,
                 "sm_percent_max": 50.0}]
        if stranger:
            seen.append({"pid": 777, "command": "jupyter", "memory_bytes_max": 3e9,
                         "sm_percent_max": 0.0})
        outcome = _gpu_outcome(tmp_path, 0, seen, others=float(len(seen)))
        assert outcome.record is not None
        outcome.record["telemetry"]["host"] = {"pid": pid}
        return outcome

    quiet = disturbance_metrics([instance(100, 200, False), instance(200, 100, False)])
    assert _value(quiet, "gpu_other_processes") == 0.0
    assert [m for m in quiet if m.name == GPU_OTHER_PROCESS] == []
    assert disturbance(3, quiet) is None
    busy = disturbance_metrics([instance(100, 200, True), instance(200, 100, False)])
    assert _value(busy, "gpu_other_processes") == 1.0
    assert [(m.value, m.unit) for m in busy if m.name == GPU_OTHER_PROCESS] == [
        (777.0, "jupyter")]

"""The simulator lab's SIMULATED GPU, on a virtual clock: batches are served back to back
at the device's rate on an absolute timeline (a late wake-up does not slow the device),
the run-to-run draw and an upgraded host's slowdown set the rate, the real backend's
outputs come back, and the record names the device as simulated."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from loadgen.backends.simulated_device import SimulatedDevice, device_rate


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Echo:
    """A backend whose outputs are its inputs doubled; costs no time."""

    name, concurrency = "echo", 1

    def infer(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        return [feeds["x"] * 2]

    def submit(self, feeds: dict[str, np.ndarray], done: Any) -> None:
        done(self.infer(feeds), None)

    def describe(self) -> dict[str, Any]:
        return {"name": "echo"}

    def mark_statistics_start(self) -> None: ...

    def statistics(self) -> None:
        return None

    def close(self) -> None: ...


def _device(rate: float, clock: Clock, slowdown: float = 0.0, draw: float = 1.0
            ) -> SimulatedDevice:
    return SimulatedDevice(Echo(), rate, slowdown=slowdown, clock=clock, sleep=clock.sleep,
                           draw=lambda: draw)


def test_batches_complete_at_the_device_rate_and_keep_their_outputs() -> None:
    clock = Clock()
    device = _device(1000.0, clock)
    out = device.infer({"x": np.ones((50, 3))})
    assert clock.now == pytest.approx(100.05)  # 50 samples at 1000/s
    assert np.array_equal(out[0], np.full((50, 3), 2.0))
    done: list[float] = []
    device.submit({"x": np.ones((100, 3))}, lambda o, e: done.append(clock.now))
    device.close()  # waits for the queued batch
    assert done == [pytest.approx(100.15)]


def test_queued_batches_keep_the_device_busy_between_the_harness_s_batches() -> None:
    """The SUT hands over the next batch while the device runs the last (IN_FLIGHT), so
    its own time between batches does not idle the device: the ends are back to back."""
    clock = Clock()
    device = _device(1000.0, clock)
    done: list[float] = []
    for _ in range(3):
        device.submit({"x": np.ones((50, 1))}, lambda o, e: done.append(clock.now))
    device.close()
    assert done == [pytest.approx(100.05), pytest.approx(100.10), pytest.approx(100.15)]
    record = device.describe()["simulated_device"]
    assert record["in_flight"] == 2 and record["batches"] == 3


def test_a_late_wake_up_does_not_slow_the_device() -> None:
    clock = Clock()
    device = _device(1000.0, clock)
    ends = [device._slot_end(10) for _ in range(3)]  # queued together: back to back
    assert ends == [pytest.approx(100.01), pytest.approx(100.02), pytest.approx(100.03)]
    clock.now = 100.025  # this process woke late for the second one
    device._wait_until(ends[2])
    assert clock.now == pytest.approx(100.03)  # the third still ends on the timeline


def test_the_draw_and_the_host_slowdown_set_the_rate() -> None:
    clock = Clock()
    assert _device(1000.0, clock, draw=1.004).rate == pytest.approx(1004.0)
    slowed = _device(1000.0, clock, slowdown=0.1)
    assert slowed.rate == pytest.approx(900.0)
    slowed.infer({"x": np.ones((90, 1))})
    assert clock.now == pytest.approx(100.1)
    record = slowed.describe()["simulated_device"]
    assert record["host_slowdown"] == 0.1 and "SIMULATED GPU" in record["note"]
    with pytest.raises(ValueError):
        _device(1000.0, clock, slowdown=0.95)


def test_the_rate_follows_the_model_and_the_slices() -> None:
    assert device_rate("resnet50", 1) * 7 == device_rate("resnet50", 7)
    assert device_rate("bert-large", 2) < device_rate("resnet50", 2)
    assert device_rate("some-onnx-file.onnx", 1) > 0


def test_an_injected_slowdown_slows_the_device_not_the_cpu(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """A CPU computing ahead of the device would hide a slowed CPU: the simulated device
    takes the injected share and the simulator host's share of its rate."""
    from loadgen import sample_run
    from loadgen.contract import InferenceRunSpec, ModelSpec

    monkeypatch.setattr(sample_run, "_open_backend", lambda spec, path, io: Echo())
    monkeypatch.setenv(sample_run.SIM_DEVICE_SLICES, "2")
    monkeypatch.setenv(sample_run.SIM_HOST_SLOWDOWN, "0.1")
    spec = InferenceRunSpec(model=ModelSpec("resnet50"), slowdown=0.05)
    device = sample_run._open_slowed(spec, None, None)  # type: ignore[arg-type]
    assert isinstance(device, SimulatedDevice) and device.inner.__class__ is Echo
    assert device.slowdown == pytest.approx(1 - 0.95 * 0.9)
    record = device.describe()["simulated_device"]
    assert record["injected_slowdown"] == 0.05
    assert record["host_slowdown"] == pytest.approx(0.1)
    assert record["nominal_rate_samples_s"] == device_rate("resnet50", 2)


def test_a_batch_the_cpu_finishes_after_the_device_is_counted() -> None:
    clock = Clock()
    device = _device(1000.0, clock)
    end = device._slot_end(10)  # due at 100.01
    clock.now = end + 0.005  # the CPU took longer than the device would
    device._wait_until(end)
    device._wait_until(device._slot_end(10))  # on time
    record = device.describe()["simulated_device"]
    assert (record["batches"], record["cpu_late_batches"]) == (2, 1)


def test_after_the_timed_part_the_cpu_sets_the_pace() -> None:
    """The accuracy pass after the timed part is not timed: it runs at the CPU's pace,
    and the record keeps the timed part's batch counts."""
    clock = Clock()
    device = _device(1000.0, clock)
    device.mark_statistics_start()
    device.submit({"x": np.ones((100, 1))}, lambda o, e: None)
    record = device.end_timed()  # waits for the queued batch
    assert clock.now == pytest.approx(100.1) and record["batches"] == 1
    done: list[float] = []
    device.submit({"x": np.ones((500, 1))}, lambda o, e: done.append(clock.now))
    assert device.infer({"x": np.ones((500, 1))})[0].shape == (500, 1)
    assert done == [pytest.approx(100.1)] and clock.now == pytest.approx(100.1)
    device.close()

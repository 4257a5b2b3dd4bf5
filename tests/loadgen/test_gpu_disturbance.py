"""Which processes on the run's device count as another process, on the NVML simulator:
only one that uses the device (memory or SM share above the stated floors), never this
harness's process tree, its own server, or (in a container that cannot see the host's
PIDs) the process that must be the harness itself; the record names PID and command."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from loadgen.spec import DeviceSpec
from loadgen.telemetry import (
    OTHER_PROCESS_MEMORY_FLOOR_BYTES,
    SERVER_COMMANDS,
    UNSEEN_COMMAND,
    DeviceProcesses,
    Telemetry,
)
from tests.labs.pynvml_simulator import PynvmlSimulator, SimulatedReadings
from vgpu.nvml.simulator import SimulatedGpuBackend

GIB = 1024**3
ME = os.getpid()
INIT = 1  # a process outside this test's tree, whose command /proc shows


def nvml(processes: list[tuple[int, int]], sm: dict[int, int] | None = None,
         mig: bool = False) -> tuple[PynvmlSimulator, str]:
    sim = SimulatedGpuBackend(["H100-80GB"], mig_enabled=mig)
    if mig:
        gi = sim.create_gpu_instance(0, 19, 0, 1)
        sim.create_compute_instance(0, gi.id)
        uuid = sim.mig_devices(0)[0].uuid
    else:
        uuid = sim.gpus()[0].uuid
    readings = SimulatedReadings(processes={uuid: processes}, sm_percent=sm or {})
    return PynvmlSimulator.started(sim, readings=readings), uuid


def watch(processes: list[tuple[int, int]], sm: dict[int, int] | None = None,
          servers: tuple[str, ...] = (), mig: bool = False,
          commands: dict[int, str | None] | None = None) -> DeviceProcesses:
    sim, uuid = nvml(processes, sm, mig)
    handle = sim.nvmlDeviceGetHandleByUUID(uuid)
    if commands is None:
        return DeviceProcesses(sim, handle, servers)
    return DeviceProcesses(sim, handle, servers, command=commands.get)


def test_the_harness_itself_is_never_another_process() -> None:
    assert watch([(ME, 40 * GIB)], sm={ME: 95}).sample() == []


def test_an_idle_context_below_both_floors_does_not_count() -> None:
    # a notebook that opened the GPU: 400 MiB, no SM time
    processes = watch([(ME, 40 * GIB), (INIT, 400 * 1024**2)], sm={ME: 95, INIT: 0})
    assert processes.sample() == []
    assert processes.seen == {}


def test_memory_above_the_floor_counts_and_is_named() -> None:
    processes = watch([(ME, 40 * GIB), (INIT, 8 * GIB)])
    [found] = processes.sample()
    assert found["pid"] == INIT
    assert found["command"] == Path("/proc/1/cmdline").read_bytes().replace(
        b"\0", b" ").decode(errors="replace").strip()[:200]
    assert found["memory_bytes_max"] == 8 * GIB
    assert 8 * GIB > OTHER_PROCESS_MEMORY_FLOOR_BYTES


def test_sm_share_above_the_floor_counts_with_little_memory() -> None:
    processes = watch([(ME, 40 * GIB), (INIT, 200 * 1024**2)], sm={ME: 60, INIT: 35})
    [found] = processes.sample()
    assert (found["pid"], found["sm_percent_max"]) == (INIT, 35.0)


def test_the_backends_own_server_is_not_another_process() -> None:
    commands = {4242: "/opt/tritonserver/bin/tritonserver --model-repository /models",
                4343: "python -m vllm.entrypoints.openai.api_server"}
    listed = [(4242, 30 * GIB), (4343, 60 * GIB)]
    triton = watch(listed, servers=SERVER_COMMANDS["triton"], commands=commands)
    assert [p["pid"] for p in triton.sample()] == [4343]  # vllm is not Triton's
    llm = watch(listed, servers=SERVER_COMMANDS["openai"], commands=commands)
    assert [p["pid"] for p in llm.sample()] == [4242]
    assert [p["pid"] for p in watch(listed, commands=commands).sample()] == [4242, 4343]


@pytest.fixture
def child() -> Iterator[int]:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        yield process.pid
    finally:
        process.kill()
        process.wait()


def test_a_child_of_the_harness_is_its_own(child: int) -> None:
    # the loopback LLM server is started by the harness: part of its tree
    assert watch([(ME, 4 * GIB), (child, 6 * GIB)], sm={child: 80}).sample() == []


def test_in_a_container_the_unseen_process_holding_most_memory_is_the_harness() -> None:
    # NVML lists host PIDs this namespace cannot see, this process among them
    commands: dict[int, str | None] = {900001: None, 900002: None}
    processes = watch([(900001, 30 * GIB), (900002, 5 * GIB)], commands=commands)
    [found] = processes.sample()
    assert (found["pid"], found["command"]) == (900002, UNSEEN_COMMAND)
    # where this process is listed, no unseen process is taken for it
    both = watch([(ME, 30 * GIB), (900001, 30 * GIB)], commands={ME: "python", 900001: None})
    assert [p["pid"] for p in both.sample()] == [900001]


def test_on_a_mig_slice_only_memory_is_read() -> None:
    processes = watch([(ME, 5 * GIB), (INIT, 2 * GIB)], sm={INIT: 90}, mig=True)
    [found] = processes.sample()
    assert found["sm_percent_max"] == 0.0 and not processes.sm_supported


def test_the_record_lists_each_disturbing_process_and_the_floors() -> None:
    sim, uuid = nvml([(ME, 40 * GIB), (INIT, 3 * GIB)], sm={INIT: 20})
    telemetry = Telemetry(DeviceSpec("gpu", None, uuid), nvml=sim, interval_s=0.05,
                          servers=("tritonserver",))
    telemetry.start()
    time.sleep(0.2)
    gpu = telemetry.stop()["gpu"]
    assert gpu["metrics"]["other_processes"]["max"] == 1.0
    others = gpu["other_processes"]
    assert [(p["pid"], p["memory_bytes_max"], p["sm_percent_max"]) for p in others["seen"]] \
        == [(INIT, 3 * GIB, 20.0)]
    assert others["memory_floor_bytes"] == OTHER_PROCESS_MEMORY_FLOOR_BYTES
    assert others["sm_share_read"] is True
    assert others["servers_ignored"] == ["tritonserver"]

"""A harness instance killed mid-run, and Ctrl-C on `vgpu bench`: the run is stored as
failed / aborted with the reason, the database stays consistent, earlier runs survive and
no harness process is left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from tests.bench.conftest import VGPU, vgpu_env
from vgpu.results.store.result_store import ResultStore

pytestmark = pytest.mark.slow


def _harness_processes(bench: subprocess.Popen[str]) -> list[psutil.Process]:
    try:
        children = psutil.Process(bench.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [p for p in children if _is_harness(p)]


def _is_harness(process: psutil.Process) -> bool:
    try:
        return "loadgen" in process.cmdline()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False


def _wait_for(path: Path, bench: subprocess.Popen[str], limit_s: float = 120) -> None:
    deadline = time.monotonic() + limit_s
    while not path.exists():
        assert bench.poll() is None, f"bench ended early: {bench.communicate()}"
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.1)


def _start(folder: Path, cache: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([*VGPU, "bench", "--scenario", "6", "--workload",
                             "resnet50-offline", "--no-report", "--no-baseline", *args],
                            cwd=folder, env=vgpu_env(cache), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)


def _default_sigint() -> None:
    # A test run started in the background inherits SIGINT as ignored, and Python then
    # never turns Ctrl-C into KeyboardInterrupt: give the child the terminal's behaviour.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_killing_one_instance_fails_the_run_and_keeps_earlier_runs(
    tmp_path: Path, harness_cache: Path
) -> None:
    bench = _start(tmp_path, harness_cache, "--runs", "2", "--duration", "2")
    try:
        # run 1 is the first repeat; kill an instance of run 2 once its timed test began
        _wait_for(tmp_path / "vgpu-results" / "2" / "s6-2g" / "mlperf_log_detail.txt", bench)
        time.sleep(0.5)
        [victim] = [p for p in _harness_processes(bench)
                    if any("/2/s6-2g/spec.json" in part for part in p.cmdline())]
        victim.send_signal(signal.SIGKILL)
        _out, err = bench.communicate(timeout=120)
    finally:
        if bench.poll() is None:
            bench.kill()
    assert bench.returncode == 1, err
    assert "s6-2g" in err and "killed by signal 9" in err
    with ResultStore.open(tmp_path / "vgpu-results.db") as store:
        assert store.integrity_check() == "ok"
        first, second = store.runs()
        assert (first.status, second.status) == ("ok", "failed")
        assert second.reason is not None
        assert "instance s6-2g: harness was killed by signal 9" in second.reason
        assert "wrote no result.json" in second.reason
        assert [i.result.status for i in store.instances(first.id)] == ["ok"] * 3
        # The others ran to their end and are stored beside the killed one; the failed
        # run stays out of the statistics.
        by_name = {i.result.name: i.result for i in store.instances(second.id)}
        assert {n: r.status for n, r in by_name.items()} == {
            "s6-4g": "ok", "s6-2g": "failed", "s6-1g": "ok"}
        assert by_name["s6-4g"].throughput and by_name["s6-1g"].throughput
    assert _harness_processes(bench) == []


def test_ctrl_c_stops_every_instance_and_records_the_run_as_aborted(
    tmp_path: Path, harness_cache: Path
) -> None:
    bench = _start(tmp_path, harness_cache, "--runs", "1", "--duration", "60")
    try:
        _wait_for(tmp_path / "vgpu-results" / "1" / "s6-1g" / "mlperf_log_detail.txt", bench)
        harnesses = _harness_processes(bench)
        assert len(harnesses) == 3
        started = time.monotonic()
        os.kill(bench.pid, signal.SIGINT)
        _out, err = bench.communicate(timeout=60)
    finally:
        if bench.poll() is None:
            bench.kill()
    assert bench.returncode == 130, err
    assert time.monotonic() - started < 30  # stopped, not run to the end
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in harnesses)
    with ResultStore.open(tmp_path / "vgpu-results.db") as store:
        [run] = store.runs()
        assert run.status == "aborted"
        assert "Ctrl-C" in (run.reason or "")
        assert store.integrity_check() == "ok"

"""The suite on two pytest-xdist workers keeps each shared resource's tests on one worker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.labs.workers import DOCKER_DAEMON, SCENARIO6_RECORDING, shared_resource_group

ROOT = Path(__file__).resolve().parents[2]


def test_docker_and_triton_tests_share_the_daemon_worker() -> None:
    assert shared_resource_group({"docker", "slow"}, []) == DOCKER_DAEMON
    assert shared_resource_group({"triton"}, ["tmp_path"]) == DOCKER_DAEMON
    # the daemon wins over the recording: one group a test
    assert shared_resource_group({"docker"}, ["scenario6_recording"]) == DOCKER_DAEMON


def test_readers_of_the_recording_share_its_worker_and_others_are_free() -> None:
    assert shared_resource_group({"slow"}, ["scenario6_recording"]) == SCENARIO6_RECORDING
    assert shared_resource_group({"vcsim", "sshd", "postgres"}, ["tmp_path"]) is None


def test_the_suite_runs_on_two_workers_by_default() -> None:
    script = (ROOT / "scripts" / "test.sh").read_text()
    assert "workers=${VGPU_TEST_WORKERS:-2}" in script
    assert '(-n "$workers" --dist loadgroup)' in script


def test_collected_docker_tests_carry_the_daemon_group() -> None:
    """What the hook in tests/conftest.py marks, read back from a real collection."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-m", "docker", "tests/container/test_bench_in_containers.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    collected = [line for line in done.stdout.splitlines() if "::" in line]
    assert collected, done.stdout
    grouped = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-m", "xdist_group", "tests/container/test_bench_in_containers.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert [line for line in grouped.stdout.splitlines() if "::" in line] == collected

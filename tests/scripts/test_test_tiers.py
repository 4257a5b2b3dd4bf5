"""How scripts/run-pytest.sh runs each tier, read off a stand-in venv whose python records
its pytest arguments and exits as told: the quick tier on pytest-xdist workers, the whole
suite as two processes side by side (the Docker lab's tests in one), "no tests" a failure."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKER_LAB = "docker or triton or train or mpi or postgres or browser or side"


def _venv(tmp_path: Path, exits: dict[str, int]) -> Path:
    """A venv whose python appends its arguments to calls.log and exits with the code of
    the first ``exits`` key found in them (else 0)."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    cases = "\n".join(f'    *"{key}"*) exit {code} ;;' for key, code in exits.items())
    python = bin_dir / "python"
    python.write_text(f"""#!/usr/bin/env bash
echo "$*" >> {tmp_path / 'calls.log'}
case "$*" in
{cases}
esac
exit 0
""")
    python.chmod(0o755)
    return tmp_path / "venv"


def _run(tmp_path: Path, tier: str, *args: str, workers: str | None = None,
         exits: dict[str, int] | None = None) -> tuple[int, list[str]]:
    venv = _venv(tmp_path, exits or {})
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    env.pop("VGPU_TEST_WORKERS", None)
    if workers is not None:
        env["VGPU_TEST_WORKERS"] = workers
    done = subprocess.run(["bash", str(ROOT / "scripts/run-pytest.sh"), str(venv), tier,
                           *args], env=env, capture_output=True, text=True, check=False)
    log = tmp_path / "calls.log"
    calls = log.read_text().splitlines() if log.exists() else []
    return done.returncode, [c for c in calls if c.startswith("-m pytest")]


def test_the_quick_tier_runs_on_two_workers_unless_told(tmp_path: Path) -> None:
    rc, calls = _run(tmp_path, "--quick", "-q")
    assert rc == 0 and len(calls) == 1
    assert calls[0].startswith("-m pytest -n 2 -m not (") and calls[0].endswith(" -q")
    rc, calls = _run(tmp_path / "one", "--quick", workers="0")
    assert rc == 0 and calls[0].startswith("-m pytest -m not (")


def test_the_whole_suite_runs_as_two_processes_the_docker_lab_whole_in_one(tmp_path: Path) -> None:
    rc, calls = _run(tmp_path, "--whole")
    assert rc == 0
    assert sorted(calls) == sorted([f"-m pytest -p no:cacheprovider -m {DOCKER_LAB}",
                                    f"-m pytest -m not ({DOCKER_LAB})"])


def test_either_process_failing_fails_the_suite(tmp_path: Path) -> None:
    rc, _ = _run(tmp_path / "a", "--whole", exits={f"-m {DOCKER_LAB}": 1})
    assert rc == 1
    rc, _ = _run(tmp_path / "b", "--whole", exits={f"not ({DOCKER_LAB})": 3})
    assert rc == 3


def test_no_tests_collected_is_a_failure_in_every_tier(tmp_path: Path) -> None:
    assert _run(tmp_path / "a", "--whole", exits={f"-m {DOCKER_LAB}": 5})[0] == 1
    assert _run(tmp_path / "b", "--whole", exits={"pytest": 5})[0] == 1
    assert _run(tmp_path / "c", "--quick", exits={"pytest": 5})[0] == 1
    assert _run(tmp_path / "d", "--whole", "tests/x", exits={"pytest": 5})[0] == 1


def test_arguments_or_no_workers_run_the_whole_suite_in_one_process(tmp_path: Path) -> None:
    rc, calls = _run(tmp_path / "a", "--whole", "-k", "lab")
    assert rc == 0 and calls == ["-m pytest -k lab"]
    rc, calls = _run(tmp_path / "b", "--whole", workers="0")
    assert rc == 0 and calls == ["-m pytest"]

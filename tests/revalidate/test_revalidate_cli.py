"""`vgpu revalidate` through its command line on this machine (inventory `local`): every
exit code, the baseline captured from three series and found again, a real CPU quota on a
later run as the regression, and --resume keeping what finished.

The machine may be busy (another job, a shared developer box): the capture and the slowed
run each get a CPU group of their own served before anything else up to its quota (one
core, then a fifth of one), so the regression judged is the quota's, never the neighbour's.
A neighbour still adds noise (on a 2-core box at load average 8, runs held to one core had
a repeat CV of 16.5%, against 1.2% idle): the regression is made large enough to be judged
through it."""

from __future__ import annotations

import json
import math
import re
import subprocess
from pathlib import Path

import pytest

from tests.bench.conftest import VGPU, vgpu_env
from tests.labs.cpuquota import cpu_quota, quota_available
from vgpu.exitcodes import exit_for
from vgpu.results.stats.noise import estimate_levels
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import SYSTEM_THROUGHPUT, load_series

pytestmark = pytest.mark.slow
SHORT = ("-w", "resnet50-offline", "--runs", "2", "--duration", "1", "--no-report")
# Three repeats: one INVALID (a run that ended early) still leaves the two a verdict needs.
STEADY = ("-w", "resnet50-offline", "--runs", "3", "--duration", "1", "--no-report")


def _revalidate(folder: Path, cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*VGPU, "revalidate", "-i", "local", *args], cwd=folder,
                          env=vgpu_env(cache), capture_output=True, text=True, timeout=600,
                          check=False)


def _revalidate_on(cores: float, folder: Path, cache: Path,
                   *args: str) -> subprocess.CompletedProcess[str]:
    """`vgpu revalidate ARGS` with the whole command held to ``cores`` of CPU, served first
    up to them (tests/labs/cpuquota.py)."""
    argv = [*VGPU, "revalidate", "-i", "local", *args]
    # the shell waits for the quota to be in place before the command starts
    started = subprocess.Popen(["bash", "-c", 'sleep 0.2; exec "$@"', "bash", *argv],
                               cwd=folder, env=vgpu_env(cache), text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with cpu_quota(started.pid, cores, first=True):
        out, err = started.communicate(timeout=600)
    return subprocess.CompletedProcess(argv, started.returncode, out, err)


def _runs(folder: Path) -> list[str]:
    with ResultStore.open(folder / "vgpu-results.db") as store:
        return [r.scenario_id for r in store.runs()]


@pytest.mark.side  # the longest here: it evens out the suite's two processes
@pytest.mark.skipif(quota_available() is not None, reason=str(quota_available()))
def test_a_baseline_captured_from_three_series_judges_with_their_spread(
    tmp_path: Path, harness_cache: Path,
) -> None:
    first = _revalidate_on(1.0, tmp_path, harness_cache, "-s", "bm5", "--capture-baseline",
                           "--baseline-series", "3", "--baseline-pause", "0", *SHORT)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "3 series per scenario, 0 s apart" in " ".join(first.stdout.split())
    with ResultStore.open(tmp_path / "vgpu-results.db") as store:
        series = list(dict.fromkeys(r.series_id for r in store.runs(status="ok")))
        members = [load_series(store, s) for s in series]
        [named] = store.baselines()
        assert len(members) == 3 and named.series_id == series[-1]
        stored = store.baseline_noise(named.series_id, SYSTEM_THROUGHPUT)
    expected = estimate_levels([m.samples[SYSTEM_THROUGHPUT].values for m in members])
    valid = sum(len(m.samples[SYSTEM_THROUGHPUT].values) for m in members)
    assert stored is not None and (stored.series, stored.repeats) == (3, valid)
    assert math.isclose(stored.series_cv, expected.series_cv, rel_tol=1e-9)

    # No --scenario: the scenarios of the baseline, on a fifth of a core. (No unchanged run
    # is judged here: on a shared machine what the command runs beside changes its result.)
    slowed = _revalidate_on(0.2, tmp_path, harness_cache, "--json", *STEADY)
    assert slowed.returncode == 3, slowed.stdout + slowed.stderr
    [verdict] = json.loads(slowed.stdout)["verdicts"]
    assert (verdict["scenario"], verdict["verdict"]) == ("bm5", "FAIL")
    assert slowed.returncode == exit_for(verdict["verdict"])
    throughput = verdict["vs_baseline"]["checks"][0]
    assert throughput["metric"] == SYSTEM_THROUGHPUT
    # a fifth of a core against one: about 80% slower
    assert throughput["verdict"] == "FAIL" and throughput["difference_pct"] < -50
    # judged with the spread of the baseline's own series, and the verdict says so
    assert (f"series level {stored.judged_series_cv * 100:.2f}% from this baseline's 3 "
            "series") in throughput["noise"]
    assert not any("no spread" in note for note in verdict["notes"])
    level = f"{stored.judged_series_cv * 100:.1f}%"
    assert (f"against baseline 'pre-upgrade': judged with the series level {level} from "
            "this baseline's 3 series") in verdict["notes"]


def test_cannot_run_exits_1_resume_keeps_what_finished_and_references_judge_a_new_lab(
    tmp_path: Path, harness_cache: Path,
) -> None:
    # four repeats: the references calibrate from two VALID ones, and a one-second run on a
    # busy machine can end early (INVALID): two of three did once beside the whole suite
    source = ("-w", "resnet50-offline", "--runs", "4", "--duration", "1", "--no-report")
    first = _revalidate(tmp_path, harness_cache, "-s", "bm5", "-s", "6", *source)
    assert first.returncode == 1, first.stdout + first.stderr
    assert "scenario 6 could not run" in first.stdout
    assert "no baseline 'pre-upgrade' stored" in first.stdout
    assert _runs(tmp_path) == ["bm5"] * 4
    [state] = (tmp_path / "vgpu-results" / "revalidate").glob("revalidate-*.json")
    saved = json.loads(state.read_text())
    assert saved["finished"] is False
    assert [(s["scenario_id"], s["status"]) for s in saved["scenarios"]] == [
        ("bm5", "done"), ("6", "could-not-run")]

    again = _revalidate(tmp_path, harness_cache, "-s", "bm5", "-s", "6", "--resume", *STEADY)
    assert again.returncode == 1
    assert _runs(tmp_path) == ["bm5"] * 4  # bm5 was not run again
    assert "bm5" in again.stdout  # its verdict row is still there

    # The finished bm5 series calibrates references; a lab with no baseline of its own
    # (another store) is judged against them.
    calibrated = subprocess.run([*VGPU, "baseline", "calibrate", "refs.yaml"], cwd=tmp_path,
                                env=vgpu_env(harness_cache), capture_output=True, text=True,
                                timeout=120, check=False)
    assert calibrated.returncode == 0, calibrated.stderr
    judged = _revalidate(tmp_path, harness_cache, "-s", "bm5", "--db", "new.db",
                         "--references", "refs.yaml", "--json", *SHORT)
    [verdict] = json.loads(judged.stdout)["verdicts"]
    assert judged.returncode == exit_for(verdict["verdict"]), judged.stderr
    assert re.search(r"calibrated reference \(1 series, n=[234]\)",
                     verdict["vs_baseline"]["title"]), verdict["vs_baseline"]["title"]
    broken = _revalidate(tmp_path, harness_cache, "-s", "bm5", "--db", "x.db",
                         "--references", "new.db")
    assert broken.returncode == 2 and not (tmp_path / "x.db").exists()


@pytest.mark.parametrize(("args", "message"), [
    (("--workload", "x"), "--scenario: no scenario given and no baseline 'pre-upgrade'"),
    (("-s", "nope"), "no scenario with id 'nope'"),
])
def test_bad_input_exits_2_and_creates_nothing(
    tmp_path: Path, harness_cache: Path, args: tuple[str, ...], message: str,
) -> None:
    done = _revalidate(tmp_path, harness_cache, *args)
    assert done.returncode == 2
    assert message in " ".join(done.stderr.split())
    assert list(tmp_path.iterdir()) == []

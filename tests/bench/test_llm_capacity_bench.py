"""`vgpu bench` of an LLM Server workload measured as capacity at the SLO, through the CLI
and the real harness: each side's harness searches a slice simulator (the GPU-less
stand-in for a serving engine on a slice; a real-time OpenAI-compatible server). Bare
metal's series is measured once for the module and stored; each VM candidate is benched
against it (the stored twin is not run again) in a copy of that store. The verdict is the
capacity ratio with its interval, VALID at bare metal's capacity and the latency checks at
a load both sides ran; stored, and `vgpu report` shows the verdict bench printed."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from loadgen.llm.slice_engine import SliceProfile
from loadgen.llm.slice_sim import SliceSimulator
from tests.bench.conftest import VGPU, RunVgpu, exit_of_json, vgpu_env
from vgpu.results.store.result_store import ResultStore
from vgpu.results.views.report import Table, build_report

# 10 ms steps that grow with the batch's context (12 us a token) against a TPOT target of
# 20 ms (TTFT 100 ms: a tenth of the 1 s runs): capacity 53-58/s for the two repeats'
# arrivals; 5% slower steps lose 10-14% of it
# (a TPOT target amplifies a slower step), a 10 ms stall every 600 ms raises the pooled
# ITL p99 by 35-46% and the mean TPOT by 2.6% — on the virtual clock
# (loadgen.llm.slice_engine.simulate; tests/results/verdict/test_capacity_checks.py).
PROFILE = SliceProfile(step_ms=10.0, context_us=12.0)
# 2 runs bracket (40/s VALID, 80/s INVALID), 5 bisect to 2.5%, 1 reruns; 40/s, well below
# the knee, stays a rate VALID every time it ran when the final point's rerun is disturbed
CAPACITY = "{start_qps: 40, runs: 8, resolution: 0.025, duration_s: 1, min_queries: 100}"

VM = """id: capvm
name: capacity-vm
platform: vsphere
gpu: A100-80GB
vms:
  - {{name: capvm-1g, vcpu: 8, memory_gb: 16, vgpus: [nvidia-1-10c]}}
guest: {{driver: vgpu-guest, container_runtime: docker, licensing: true}}
workloads:
  - name: llm-server
    model: llm
    backend: openai
    url: {url}
    scenario: Server
    capacity: {capacity}
    max_output_tokens: 16
    input_tokens: {{min: 16, max: 48}}
    ttft_ms: 100
    tpot_ms: 20
    cpu_duration_s: 1
repeats: 3
baseline: {{scenario: capbm}}
"""
BARE = """id: capbm
name: capacity-bare-metal
platform: bare-metal
gpu: A100-80GB
vms:
  - {{name: capbm-1g, vgpus: [1g.10gb]}}
guest: {{driver: datacenter, container_runtime: docker, licensing: false}}
workloads:
  - name: llm-server
    model: llm
    backend: openai
    url: {url}
    scenario: Server
    capacity: {capacity}
    max_output_tokens: 16
    input_tokens: {{min: 16, max: 48}}
    ttft_ms: 100
    tpot_ms: 20
    cpu_duration_s: 1
repeats: 3
"""


# Repeats a side: 3, the fewest a capacity verdict decides on. The suite checks that a
# slower slice is never PASSed and that the verdict travels whole from the harness to the
# store and the report; that 10% slower steps FAIL in real time is a claim about these
# shared cores' noise, shown with 4 repeats by benchmarks/llm_capacity_checks.py (on the
# virtual clock 5% slower steps FAIL: tests/results/verdict/test_capacity_checks.py).
REPEATS = int(os.environ.get("VGPU_CAPACITY_REPEATS", "3"))


@pytest.fixture(scope="module")
def bare_metal(tmp_path_factory: pytest.TempPathFactory, harness_cache: Path) -> Path:
    """A folder whose store holds bare metal's capacity series (REPEATS repeats, as the
    VM's)."""
    folder = tmp_path_factory.mktemp("capacity-lab")
    (folder / "scenarios").mkdir()
    with SliceSimulator(PROFILE) as bare:
        (folder / "scenarios" / "capbm.yaml").write_text(
            BARE.format(url=bare.url, capacity=CAPACITY))
        done = subprocess.run(
            [*VGPU, "bench", "--scenario", "capbm", "--runs", str(REPEATS), "--json"],
            cwd=folder,
            env={**vgpu_env(harness_cache), "VGPU_SCENARIOS": str(folder / "scenarios")},
            capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == exit_of_json(done.stdout), done.stdout + done.stderr
    return folder


def _bench(run_vgpu: RunVgpu, cache: Path, lab: Path, tmp_path: Path,
           vm_profile: SliceProfile) -> tuple[subprocess.CompletedProcess[str], str]:
    """The VM candidate on ``vm_profile`` benched against the stored bare-metal series,
    in ``tmp_path`` (a copy of the module's store): the bench and the report."""
    shutil.copytree(lab, tmp_path, dirs_exist_ok=True)
    folder = tmp_path / "scenarios"
    with SliceSimulator(vm_profile) as vm:
        (folder / "capvm.yaml").write_text(VM.format(url=vm.url, capacity=CAPACITY))
        done = subprocess.run(
            [*VGPU, "bench", "--scenario", "capvm", "--runs", str(REPEATS), "--json"],
            cwd=tmp_path,
            env={**vgpu_env(cache), "VGPU_SCENARIOS": str(folder)}, capture_output=True,
            text=True, timeout=600, check=False)
    report = run_vgpu("report", "--out", "r.html")
    assert report.returncode == 0, report.stdout + report.stderr
    return done, (tmp_path / "r.html").read_text()


def _checks(stdout: str) -> list[dict[str, str]]:
    doc = json.loads(stdout)
    workload = next(w for w in doc["workloads"] if w["workload"].startswith("llm-server"))
    return list(workload["checks"])


def _verdict(stdout: str) -> dict[str, str]:
    return {c["metric"]: c["verdict"] for c in _checks(stdout)}


def _report_checks(folder: Path) -> dict[str, str]:
    """The report's checks of the compared series (the same store, judged again)."""
    with ResultStore.open_existing(folder / "vgpu-results.db") as store:
        checks = dict(build_report(store).sections)["Every check of the compared series"]
    assert isinstance(checks, Table)
    return {row[1]: row[7] for row in checks.rows}


@pytest.mark.slow
@pytest.mark.side
def test_a_slice_with_10_percent_slower_steps_is_never_passed_and_its_verdict_is_stored(
        run_vgpu: RunVgpu, harness_cache: Path, bare_metal: Path, tmp_path: Path) -> None:
    done, report = _bench(run_vgpu, harness_cache, bare_metal, tmp_path,
                          replace(PROFILE, slowdown=1.10))
    assert done.returncode == exit_of_json(done.stdout), done.stdout + done.stderr
    assert done.returncode in (3, 4), done.stdout + done.stderr  # FAIL, or undecided
    checks = _verdict(done.stdout)
    assert _report_checks(tmp_path) == checks  # report shows the verdicts bench printed
    # The capacity, the workload's verdict, is never PASSed. The mean TPOT at the matched
    # load may PASS beside a CPU hog: there the machine's own delay is added to both sides'
    # steps, and the difference measured was within its band (seen once, the job then
    # INCONCLUSIVE: exit 4).
    assert checks["capacity_at_slo"] in ("FAIL", "INCONCLUSIVE"), checks
    # every repeat INVALID at the line: p = 1/2^3 for a VM within the margin, no FAIL alone
    assert checks["valid_at_bare_metal_capacity"] == "INCONCLUSIVE", checks
    assert "inter_token_latency_p99_at_matched_load" in checks
    assert "output_token_throughput" not in checks
    assert "capacity_at_slo" in report
    assert "Capacity at the latency SLO" in report  # the searches' table
    with sqlite3.connect(tmp_path / "vgpu-results.db") as db:
        stored = [json.loads(r[0]) for r in db.execute("SELECT result_json FROM instances")]
    searches = [s["capacity"] for s in stored if s.get("capacity")]
    assert len(searches) == 2 * REPEATS  # bare metal's repeats and the VM's (no warm-up)
    first = searches[0]
    assert {"capacity_qps", "confirmed", "runs", "slo_ms", "budget", "engine"} <= set(first)
    assert {"rate", "valid", "goodput", "ttft_p99_ms", "tpot_p99_ms", "itl_p99_ms",
            "itl_p999_ms", "longest_stall_ms", "tails", "client"} <= set(first["runs"][0])
    assert first["runs"][0]["client"]["concurrency"] == 256
    assert "client send lag p99 ms" in report
    assert first["engine"]["version"]["version"] == "vgpu-slice-simulator"
    assert first["engine"]["cache"]["kv_blocks_total"] == 65536  # 2^20 tokens / 16
    assert first["engine"]["cache"]["prefix_cache_hit_rate"] == 0.0

"""`vgpu bench` of scenario 6's LLM workload run as a LoadGen Server workload at a fixed
rate (`target_qps` in place of its `capacity`: what a scenario keeps for MLPerf's logs) on
this CPU, against its bare-metal twin: the token panel, the verdict with the token checks,
the report's TTFT/TPOT table and the MLPerf export of LoadGen's token-latency logs. The
capacity verdict is tests/bench/test_llm_capacity_bench.py's."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.bench.conftest import RAN_AND_STORED, VGPU, vgpu_env
from vgpu.exitcodes import exit_for

ROOT = Path(__file__).resolve().parents[2]


def _at_fixed_rate(folder: Path) -> None:
    """Scenarios 6 and bm6 with the LLM workload at target_qps 100 instead of a search."""
    folder.mkdir()
    for name in ("mig_4g_2g_1g.yaml", "bm_mig_4g_2g_1g.yaml"):
        data = yaml.safe_load((ROOT / "scenarios" / name).read_text())
        for workload in data["workloads"]:
            if workload.get("model") == "llm":
                del workload["capacity"]
                workload["target_qps"] = 100
        (folder / name).write_text(yaml.safe_dump(data))


@pytest.mark.slow
def test_scenario_6_llm_workload_ends_in_a_verdict_and_exports_token_logs(
        harness_cache: Path, tmp_path: Path) -> None:
    _at_fixed_rate(tmp_path / "scenarios")
    env = {**vgpu_env(harness_cache), "VGPU_SCENARIOS": str(tmp_path / "scenarios")}

    def run_vgpu(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*VGPU, *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300, check=False)

    # the workload's own 5 s: LoadGen's early stopping needs ~460 queries at 100/s. The
    # twin runs first and is stored: two repeats a side and no warm-up runs, where the
    # interleaved design (tested in test_local_bench.py) adds two of each
    twin = run_vgpu("bench", "--scenario", "bm6", "--workload", "llm-server", "--runs", "2",
                    "--no-report")
    assert twin.returncode in RAN_AND_STORED, twin.stdout + twin.stderr
    done = run_vgpu("bench", "--scenario", "6", "--workload", "llm-server", "--runs", "2",
                    "--report", "r.html")
    out = " ".join(done.stdout.split())
    # a verdict, whichever, and the exit code that says it: both sides run on this CPU,
    # and a neighbour that starts or stops between them moves their latencies
    verdict = re.search(r"verdict vs scenario bm6: (PASS|FAIL|INCONCLUSIVE)", out)
    assert verdict is not None, done.stdout + done.stderr
    assert done.returncode == exit_for(verdict.group(1)), done.stdout + done.stderr
    assert "llm-server: tokens (mean over valid repeats)" in out
    assert "verdict vs scenario bm6" in out
    for check in ("time_to_first_token_p99:", "inter_token_latency_p99:",
                  "valid_at_offered_rate:", "accuracy: +0.00% (PASS)"):
        assert check in out
    for offered in ("output_token_throughput", "system_throughput"):
        for sign in "+-":  # a check's line: "<metric>: +0.01% (...)"
            assert f"{offered}: {sign}" not in out  # the offered rate, not a finding
    assert "TTFT p99 ms" in (tmp_path / "r.html").read_text()
    export = tmp_path / "export"
    done = run_vgpu("results", "--export", "mlperf", str(export), "--submitter", "lab")
    assert done.returncode == 0, done.stdout + done.stderr
    summaries = list(export.rglob("Server/performance/run_1/mlperf_log_summary.txt"))
    assert summaries, sorted(str(p) for p in export.rglob("*"))
    summary = summaries[0].read_text()
    mean = next(line for line in summary.splitlines() if line.startswith("Mean First Token"))
    assert int(mean.split(":")[1]) > 0
    detail = (summaries[0].parent / "mlperf_log_detail.txt").read_text()
    assert "result_first_token_99.00_percentile_latency_ns" in detail
    result_dir = summaries[0].parents[2]
    conf = (result_dir / "user.conf").read_text()
    assert "llm-tiny.Server.use_token_latencies = 1" in conf
    assert "llm-tiny.Server.ttft_latency = 2000000000" in conf  # CPU: MLPerf's target
    tokens = json.loads((result_dir / "measurements.json").read_text())["vgpu"][
        "token_latencies"]
    assert tokens["source"] == "loadgen"
    assert tokens["time_to_first_token_ms"]["p99"] > 0

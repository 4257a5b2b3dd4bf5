"""`vgpu results --export mlperf DIR` on real short benches (real harness, LoadGen, ONNX
Runtime, tiny models): one workload with an accuracy pass, one under --mlperf-rules. The
exported folder is read back: the MLCommons layout, the LoadGen logs byte for byte, the
system descriptions; re-exporting is idempotent and leaves other content alone."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.bench.conftest import VGPU, vgpu_env
from vgpu.results.store import ResultStore

pytestmark = pytest.mark.slow
QUICK = ["--scenario", "bm5", "--runs", "1", "--duration", "1", "--no-baseline",
         "--no-report"]
SYSTEM_KEYS = {"system_name", "number_of_nodes", "host_processor_model_name",
               "host_processor_core_count", "accelerator_model_name", "accelerators_per_node",
               "accelerator_memory_capacity", "framework", "operating_system",
               "other_software_stack", "division", "status", "system_type"}
PERFORMANCE = ("mlperf_log_summary.txt", "mlperf_log_detail.txt", "mlperf_log_accuracy.json")
OFFICIAL_SEEDS = {"qsl_rng_seed": 2085463073848966840,
                  "sample_index_rng_seed": 2747215439041700203,
                  "schedule_rng_seed": 16159082839903944936}


@dataclass
class Benched:
    folder: Path
    cache: Path
    rules_output: str

    def vgpu(self, *args: str) -> subprocess.CompletedProcess[str]:
        return _vgpu(self.folder, self.cache, *args)


def _vgpu(folder: Path, cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*VGPU, *args], cwd=folder, env=vgpu_env(cache), capture_output=True,
                          text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def benched(tmp_path_factory: pytest.TempPathFactory) -> Benched:
    folder = tmp_path_factory.mktemp("mlperf-export")
    harness_cache = tmp_path_factory.mktemp("harness-models")
    accuracy = _vgpu(folder, harness_cache, "bench", *QUICK, "--workload", "bert-offline")
    assert accuracy.returncode == 0, accuracy.stderr
    rules = _vgpu(folder, harness_cache, "bench", *QUICK, "--workload", "resnet50-offline",
                  "--mlperf-rules")
    assert rules.returncode == 0, rules.stderr
    return Benched(folder, harness_cache, rules.stdout + rules.stderr)


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _stored(folder: Path) -> dict[str, Any]:
    """Benchmark folder name -> the stored run and its one instance."""
    with ResultStore.open_existing(folder / "vgpu-results.db") as store:
        found = {}
        for run in store.runs(status="ok"):
            [instance] = store.instances(run.id)
            name = "resnet50-tiny" if run.workload_detail["model"] == "resnet50" \
                else "bert-99.9-tiny"
            found[name] = (run, instance.result)
        return found


def _summary_field(text: str, name: str) -> str:
    found = re.search(rf"^{re.escape(name)}\s*:\s*(.+)$", text, re.MULTILINE)
    assert found, f"{name} not in the summary"
    return found.group(1).strip()


def test_export_writes_the_mlcommons_layout_with_the_loadgen_logs_intact(
    benched: Benched, tmp_path: Path,
) -> None:
    out = tmp_path / "submission"
    done = benched.vgpu("results", "--export", "mlperf", str(out))
    assert done.returncode == 0, done.stderr
    stored = _stored(benched.folder)
    system = stored["resnet50-tiny"][1].platform.host
    results = f"results/{system}"
    expected = {f"systems/{system}.json"}
    for benchmark in ("resnet50-tiny", "bert-99.9-tiny"):
        base = f"{results}/{benchmark}/Offline"
        expected |= {f"{base}/performance/run_1/{name}" for name in PERFORMANCE}
        expected |= {f"{base}/user.conf", f"{base}/measurements.json"}
    expected |= {f"{results}/bert-99.9-tiny/Offline/accuracy/{name}"
                 for name in (*PERFORMANCE, "accuracy.txt")}
    assert set(_tree(out)) == expected

    for benchmark, (run, instance) in stored.items():
        run_1 = out / results / benchmark / "Offline" / "performance" / "run_1"
        log_dir = Path(instance.log_dir)
        for name in ("mlperf_log_summary.txt", "mlperf_log_detail.txt"):
            assert (run_1 / name).read_bytes() == (log_dir / name).read_bytes()
        summary = (run_1 / "mlperf_log_summary.txt").read_text()
        assert _summary_field(summary, "Result is") == instance.validity  # VALID or INVALID
        assert _summary_field(summary, "Scenario") == "Offline"
        assert float(_summary_field(summary, "Samples per second")) == pytest.approx(
            instance.throughput, rel=1e-4)
        assert f"run {run.id} {instance.name} -> {results}/{benchmark}/Offline" in done.stdout

    description = json.loads((out / f"systems/{system}.json").read_text())
    assert set(description) >= SYSTEM_KEYS
    assert description["system_name"] == system and description["number_of_nodes"] == 1
    assert description["accelerators_per_node"] == 0  # a CPU run used no accelerator
    assert description["framework"].startswith("onnxruntime ")
    assert "mlcommons-loadgen" in description["framework"]
    assert description["vgpu"]["target_kind"] == "bare-metal"


def test_the_accuracy_pass_goes_to_accuracy_with_its_score(benched: Benched,
                                                          tmp_path: Path) -> None:
    out = tmp_path / "submission"
    assert benched.vgpu("results", "--export", "mlperf", str(out)).returncode == 0
    run, instance = _stored(benched.folder)["bert-99.9-tiny"]
    folder = next(out.glob("results/*/bert-99.9-tiny/Offline"))
    accuracy = folder / "accuracy"
    pass_logs = Path(instance.log_dir) / "accuracy"
    for name in ("mlperf_log_summary.txt", "mlperf_log_detail.txt"):
        assert (accuracy / name).read_bytes() == (pass_logs / name).read_bytes()
    detail = (accuracy / "mlperf_log_detail.txt").read_text()
    assert '"key": "effective_test_mode", "value": "AccuracyOnly"' in detail
    log = json.loads((accuracy / "mlperf_log_accuracy.json").read_text())
    assert len(log) == instance.result["accuracy"]["samples"] == 256
    score = instance.result["accuracy"]
    text = (accuracy / "accuracy.txt").read_text()
    assert f"{score['metric']}: {score['value']}" in text and "passed: True" in text
    # the timed run logged no accuracy records
    assert json.loads((folder / "performance/run_1/mlperf_log_accuracy.json").read_text()) == []
    measured = json.loads((folder / "measurements.json").read_text())
    assert measured["input_data_types"] == "fp16" and measured["retraining"] == "No"
    assert measured["vgpu"]["run_id"] == run.id


def test_a_run_under_mlperf_rules_uses_loadgen_official_settings_and_says_so(
    benched: Benched, tmp_path: Path,
) -> None:
    run, instance = _stored(benched.folder)["resnet50-tiny"]
    assert "MLPerf rules" in run.workload
    assert run.workload_detail["mlperf_rules"] == {
        "applied": True, "source": "mlperf_loadgen built-in mlperf.conf",
        "shortened_duration_s": 1.0, "compliant": False}
    assert "MLPerf rules" in benched.rules_output
    assert "not a compliant run" in " ".join(benched.rules_output.split())
    rules = instance.result["mlperf_rules"]
    assert rules["model"] == "resnet50" and rules["compliant_settings"] is False
    assert rules["official"]["min_duration_ms"] == 600000
    assert rules["official"]["min_query_count"] == 24576
    assert rules["deviations"] == {"min_duration_ms": 1000}
    settings = instance.result["settings"]  # what LoadGen logged it ran with
    assert {key: settings[key] for key in OFFICIAL_SEEDS} == OFFICIAL_SEEDS
    # LoadGen raises the count when the expected QPS x duration asks for more samples
    assert settings["min_sample_count"] >= 24576 and settings["min_duration_ms"] == 1000
    assert settings["performance_sample_count"] == 1024  # the QSL size of the rules
    out = tmp_path / "submission"
    assert benched.vgpu("results", "--export", "mlperf", str(out)).returncode == 0
    conf = next(out.glob("results/*/resnet50-tiny/Offline/user.conf")).read_text()
    assert "under MLPerf rules" in conf
    assert [line for line in conf.splitlines() if not line.startswith("#")] == [
        f"resnet50-tiny.Offline.target_qps = {settings['target_qps']:g}",
        "resnet50-tiny.Offline.min_duration = 1000"]


def test_reexport_is_idempotent_and_keeps_other_content(benched: Benched,
                                                        tmp_path: Path) -> None:
    out = tmp_path / "submission"
    (out / "results" / "other-system").mkdir(parents=True)
    (out / "results" / "other-system" / "notes.txt").write_text("keep me")
    (out / "README.md").write_text("# our submission\n")
    assert benched.vgpu("results", "--export", "mlperf", str(out)).returncode == 0
    first = _tree(out)
    again = benched.vgpu("results", "--export", "mlperf", str(out), "--scenario", "bm5")
    assert again.returncode == 0, again.stderr
    assert _tree(out) == first
    assert (out / "README.md").read_text() == "# our submission\n"
    assert (out / "results" / "other-system" / "notes.txt").read_text() == "keep me"


@pytest.mark.parametrize(("args", "expected"), [
    (["--export", "mlperf"], "--export mlperf DIR"),
    (["--export", "mlperf", "vgpu-results.db"], "is not a folder"),
    (["--export", "mlperf", "out", "--scenario", "no-such"], "pick ok runs"),
    (["--export", "csv", "out"], "only taken by --export mlperf"),
])
def test_bad_export_requests_are_input_errors(benched: Benched, args: list[str],
                                              expected: str) -> None:
    done = benched.vgpu("results", *args)
    assert done.returncode == 2
    assert expected in " ".join((done.stdout + done.stderr).split())

"""`vgpu results --export mlperf DIR --submitter ORG` on real short benches (real harness,
LoadGen, ONNX Runtime, tiny models): a resnet50 run under --mlperf-rules with an accuracy
pass, a BERT run with one, a resnet50 run without one. The exported tree is read back
against the v6.1 submission rules vgpu mirrors: the levels, the files per result, the
system description keys, honest names and system type, accuracy.txt's hash line, and
the exact reasons a tiny CPU run is not submittable."""

from __future__ import annotations

import hashlib
import json
import re
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.bench.conftest import RAN_AND_STORED
from tests.results.mlperf_benches import SUBMITTER, bench_resnet_with_accuracy, run_vgpu
from vgpu.results.export.mlperf_system import REQUIRED_KEYS, UNKNOWN_PREFIX
from vgpu.results.store.result_store import ResultStore

pytestmark = pytest.mark.slow
QUICK = ["--runs", "1", "--duration", "1", "--no-baseline", "--no-report"]
PERFORMANCE = ("mlperf_log_summary.txt", "mlperf_log_detail.txt", "mlperf_log_accuracy.json")
ACCURACY = (*PERFORMANCE, "accuracy.txt")
RESULT_FILES = ("README.md", "user.conf", "measurements.json")
SYSTEM = f"bm-{socket.gethostname()}"
@dataclass
class Benched:
    folder: Path
    cache: Path

    def vgpu(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_vgpu(self.folder, self.cache, *args)


@pytest.fixture(scope="module")
def benched(tmp_path_factory: pytest.TempPathFactory) -> Benched:
    folder = tmp_path_factory.mktemp("mlperf-export")
    cache = tmp_path_factory.mktemp("harness-models")
    bench_resnet_with_accuracy(folder, cache, *QUICK)
    # bm5's resnet50 runs without an accuracy pass
    done = run_vgpu(folder, cache, "bench", "--scenario", "bm5", *QUICK, "--workload",
                 "bert-offline", "--workload", "resnet50-offline")
    assert done.returncode in RAN_AND_STORED, done.stderr
    return Benched(folder, cache)


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _stored(folder: Path) -> dict[str, Any]:
    """Scenario id and model -> the stored run and its one instance."""
    with ResultStore.open_existing(folder / "vgpu-results.db") as store:
        return {(run.scenario_id, run.workload_detail["model"]):
                (run, store.instances(run.id)[0].result) for run in store.runs(status="ok")}


def _export(benched: Benched, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = benched.vgpu("results", "--export", "mlperf", str(out), "--submitter", SUBMITTER,
                        *args)
    assert done.returncode in RAN_AND_STORED, done.stdout + done.stderr
    return done


def _words(done: subprocess.CompletedProcess[str]) -> str:
    return " ".join((done.stdout + done.stderr).split())


def test_export_writes_the_submission_tree_with_the_loadgen_logs_intact(
    benched: Benched, tmp_path: Path,
) -> None:
    out = tmp_path / "submission"
    done = _export(benched, out)
    root = f"open/{SUBMITTER}"
    files = set(_tree(out))
    expected = {f"{root}/systems/{SYSTEM}.json", f"{root}/src/README.md",
                f"{root}/model_mapping.json"}
    for benchmark in ("resnet50-tiny", "bert-99.9-tiny"):
        base = f"{root}/results/{SYSTEM}/{benchmark}/Offline"
        expected |= {f"{base}/performance/run_1/{name}" for name in PERFORMANCE}
        expected |= {f"{base}/accuracy/{name}" for name in ACCURACY}
        expected |= {f"{base}/{name}" for name in RESULT_FILES}
    harness = {f for f in files if f.startswith(f"{root}/src/vgpu-loadgen-harness/")}
    assert f"{root}/src/vgpu-loadgen-harness/runner.py" in harness
    assert files - harness == expected
    mapping = json.loads((out / root / "model_mapping.json").read_text())
    assert mapping == {"resnet50-tiny": "resnet", "bert-99.9-tiny": "bert-99.9"}

    stored = _stored(benched.folder)
    for benchmark, key in (("resnet50-tiny", ("export-rn50", "resnet50")),
                           ("bert-99.9-tiny", ("bm5", "bert"))):
        run, instance = stored[key]
        folder = out / root / "results" / SYSTEM / benchmark / "Offline"
        log_dir = Path(instance.log_dir)
        for name in ("mlperf_log_summary.txt", "mlperf_log_detail.txt"):
            assert (folder / "performance/run_1" / name).read_bytes() == \
                (log_dir / name).read_bytes()
            assert (folder / "accuracy" / name).read_bytes() == \
                (log_dir / "accuracy" / name).read_bytes()
        assert json.loads((folder / "performance/run_1/mlperf_log_accuracy.json")
                          .read_text()) == []
        assert f"run {run.id} {instance.name} -> {root}/results/{SYSTEM}/{benchmark}/Offline" \
            in done.stdout
        readme = (folder / "README.md").read_text()
        assert f"vgpu run {run.id}" in readme
        assert f"vgpu bench --scenario {run.scenario_id} --workload" in readme


def test_a_run_without_an_accuracy_pass_is_left_out_with_why(benched: Benched,
                                                             tmp_path: Path) -> None:
    done = _export(benched, tmp_path / "submission")
    run, instance = _stored(benched.folder)[("bm5", "resnet50")]
    assert f"not exported: run {run.id} {instance.name}: no accuracy pass" in _words(done)
    only = benched.vgpu("results", "--export", "mlperf", str(tmp_path / "other"),
                        "--submitter", SUBMITTER, "--scenario", "bm5", "--status", "ok")
    assert only.returncode == 0  # bert has one
    assert not (tmp_path / "other" / "open" / SUBMITTER / "results" / SYSTEM /
                "resnet50-tiny").exists()


def test_system_description_has_every_required_key_named_honestly(
    benched: Benched, tmp_path: Path,
) -> None:
    out = tmp_path / "submission"
    done = _export(benched, out)
    path = out / "open" / SUBMITTER / "systems" / f"{SYSTEM}.json"
    description = json.loads(path.read_text())
    assert set(REQUIRED_KEYS) <= set(description)
    assert all(description[key] not in (None, "", 0) for key in REQUIRED_KEYS
               if key not in ("sw_notes",))
    assert description["submitter"] == SUBMITTER and description["division"] == "open"
    assert description["system_type"] == "edge"  # resnet50 and BERT: edge suite only
    assert description["system_name"] == SYSTEM and not SYSTEM.startswith("vm_")
    assert description["system_type_detail"] == "bare metal"
    assert description["hw_notes"] == "bare metal"
    assert description["vgpu"]["host"] == socket.gethostname()
    assert description["vgpu"]["hypervisor"] is None
    assert description["accelerators_per_node"] == "0"  # a CPU run used no accelerator
    assert description["accelerator_model_name"] == "none (CPU run)"
    assert description["framework"].startswith("onnxruntime ")
    assert "mlcommons-loadgen" in description["framework"]
    assert description["operating_system"].startswith(UNKNOWN_PREFIX) is False
    unknown = [key for key in REQUIRED_KEYS if str(description[key]).startswith(UNKNOWN_PREFIX)]
    assert "host_storage_capacity" in unknown and "cooling" in unknown
    shown = f"open/{SUBMITTER}/systems/{SYSTEM}.json"
    assert description["cooling"] == f"{UNKNOWN_PREFIX}: set it in {shown} (kept when " \
        "exported again)"
    assert f"unknown to vgpu in {shown}: {', '.join(unknown)}" in _words(done)


def test_values_the_user_sets_in_the_system_file_survive_a_reexport(
    benched: Benched, tmp_path: Path,
) -> None:
    out = tmp_path / "submission"
    _export(benched, out)
    path = out / "open" / SUBMITTER / "systems" / f"{SYSTEM}.json"
    edited = json.loads(path.read_text())
    edited.update(cooling="air", status="available", framework="mine")
    path.write_text(json.dumps(edited))
    again = _export(benched, out)
    description = json.loads(path.read_text())
    assert description["cooling"] == "air" and description["status"] == "available"
    assert description["framework"].startswith("onnxruntime ")  # vgpu's own is rewritten
    unknown = _words(again).split("unknown to vgpu in")[1].split("(set them")[0]
    assert "cooling" not in unknown and "host_storage_type" in unknown


def test_accuracy_txt_ends_with_the_hash_of_the_full_accuracy_log(benched: Benched,
                                                                  tmp_path: Path) -> None:
    out = tmp_path / "submission"
    _export(benched, out)
    _, instance = _stored(benched.folder)[("bm5", "bert")]
    folder = out / "open" / SUBMITTER / "results" / SYSTEM / "bert-99.9-tiny" / "Offline"
    full = (Path(instance.log_dir) / "mlperf_log_accuracy.json").read_bytes()
    text = (folder / "accuracy" / "accuracy.txt").read_text()
    assert f"hash={hashlib.sha256(full).hexdigest()}" in text.splitlines()
    score = instance.result["accuracy"]
    assert f"vgpu {score['metric']}: {score['value']}" in text
    assert not any(line.startswith("accuracy=") for line in text.splitlines())  # agreement
    exported = (folder / "accuracy" / "mlperf_log_accuracy.json").read_bytes()
    assert len(exported) <= 10 * 1024
    if len(full) > 10 * 1024:
        assert exported.startswith(full[:4096]) and exported.endswith(full[-4096:])
    else:
        assert exported == full
    assert len(json.loads(full)) == score["samples"] == 256


def test_a_tiny_cpu_run_is_exported_with_the_exact_reasons_it_is_not_submittable(
    benched: Benched, tmp_path: Path,
) -> None:
    out = tmp_path / "submission"
    done = _export(benched, out, "--scenario", "export-rn50")
    reasons = ["duration: min_duration was 1000 ms; the rules ask for 600000 ms (run "
               "without --duration under --mlperf-rules)",
               "accuracy: the accuracy pass covered 256 samples; resnet50 needs its whole "
               "dataset, 50000 (set the workload's accuracy_samples)"]
    words = _words(done)
    for reason in reasons:
        assert f"not submittable: {reason}" in words
    assert "NOT submittable" in words
    readme = next(out.glob("open/*/results/*/resnet50-tiny/Offline/README.md")).read_text()
    assert [line for line in readme.splitlines() if line.startswith("- not submittable")] \
        == [f"- not submittable: {reason}" for reason in reasons]


def test_the_closed_division_also_names_the_model_and_the_missing_scenarios(
    benched: Benched, tmp_path: Path,
) -> None:
    out = tmp_path / "submission"
    done = _export(benched, out, "--scenario", "export-rn50", "--division", "closed")
    words = _words(done)
    assert "not submittable: model: resnet50-tiny is not the resnet50 reference model; a " \
        "smaller variant is only submittable in the open division" in words
    assert f"not submittable: {SYSTEM}/resnet50-tiny: the closed division's edge suite " \
        "also needs SingleStream, MultiStream" in words
    assert "not submittable: compliance: the closed division needs the audit runs TEST01, " \
        "TEST04 in this result's folder; vgpu does not run them" in words
    assert not (out / "closed" / SUBMITTER / "model_mapping.json").exists()
    description = json.loads((out / "closed" / SUBMITTER / "systems" /
                              f"{SYSTEM}.json").read_text())
    assert description["division"] == "closed"


def test_reexport_is_idempotent_and_keeps_other_content(benched: Benched,
                                                        tmp_path: Path) -> None:
    out = tmp_path / "submission"
    root = out / "open" / SUBMITTER
    (root / "results" / "other-system").mkdir(parents=True)
    (root / "results" / "other-system" / "notes.txt").write_text("keep me")
    (out / "README.md").write_text("# our submission\n")
    _export(benched, out)
    first = _tree(out)
    _export(benched, out)
    assert _tree(out) == first
    assert (out / "README.md").read_text() == "# our submission\n"
    assert (root / "results" / "other-system" / "notes.txt").read_text() == "keep me"


@pytest.mark.parametrize(("args", "expected"), [
    (["--export", "mlperf"], "--export mlperf DIR"),
    (["--export", "mlperf", "out"], "add --submitter ORG"),
    (["--export", "mlperf", "vgpu-results.db", "--submitter", "x"], "is not a folder"),
    (["--export", "mlperf", "out", "--submitter", "a/b"], "'a/b' is not a folder name"),
    (["--export", "mlperf", "out", "--submitter", "x", "--division", "network"],
     "use --division open or --division closed"),
    (["--export", "mlperf", "out", "--submitter", "x", "--scenario", "no-such"],
     "pick ok runs"),
    (["--export", "csv", "out"], "only taken by --export mlperf"),
])
def test_bad_export_requests_are_input_errors(benched: Benched, args: list[str],
                                              expected: str) -> None:
    done = benched.vgpu("results", *args)
    assert done.returncode == 2
    assert expected in _words(done)
    assert not (benched.folder / "out").exists()


def test_summary_fields_match_the_store(benched: Benched, tmp_path: Path) -> None:
    out = tmp_path / "submission"
    _export(benched, out)
    run, instance = _stored(benched.folder)[("export-rn50", "resnet50")]
    summary = next(out.glob("open/*/results/*/resnet50-tiny/Offline/performance/run_1/"
                            "mlperf_log_summary.txt")).read_text()
    found = re.search(r"^Samples per second\s*:\s*(.+)$", summary, re.MULTILINE)
    assert found and float(found.group(1)) == pytest.approx(instance.throughput, rel=1e-4)
    conf = next(out.glob("open/*/results/*/resnet50-tiny/Offline/user.conf")).read_text()
    assert "under MLPerf rules" in conf and "resnet50-tiny.Offline.min_duration = 1000" in conf
    assert run.workload_detail["mlperf_rules"]["compliant"] is False

"""Bad input to the bench and results commands: exit code 2, a message naming the file or
flag, the field and the fix, and nothing written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cli.invoke import run_cli
from tests.results.series import Repeat, record_series
from vgpu.errors import InputError
from vgpu.results.store.records import InstanceResult
from vgpu.results.store.result_store import ResultStore


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "r.db"
    with ResultStore.open(path) as store:
        for series, values, kind in (("a", (100.0, 101.0), "vm"),
                                     ("b", (80.0, 81.0), "bare-metal")):
            record_series(store, [Repeat([InstanceResult(name="i", status="ok", throughput=v)])
                                  for v in values],
                          series_id=series, workload="w", target_kind=kind)
    return path


@pytest.mark.parametrize(("args", "words"), [
    (["bench", "--scenario", "6", "--runs", "0"], ["--runs", "must be >= 1", "fix:"]),
    (["bench", "--scenario", "6", "--duration", "-1"], ["--duration", "must be > 0"]),
    (["bench", "--scenario", "6", "--workload", "nope"],
     ["mig_4g_2g_1g.yaml --workload", "no workload named 'nope'", "resnet50-offline"]),
    (["bench", "--scenario", "99"], ["no scenario with id '99'"]),
    (["bench", "--scenario", "6", "--inject-slowdown", "95"],
     ["--inject-slowdown", "below 90, got 95", "fix: give e.g. --inject-slowdown 10"]),
    (["calibrate", "noise", "--scenario", "6", "--workload", "nope"],
     ["--workload", "no inference workload named 'nope'", "resnet50-offline"]),
    (["bench", "--scenario", "train_bm_1", "--workload", "resnet50-train"],
     ["scenario train_bm_1 has only training workloads", "fix: leave them out"]),
])
def test_bench_input_errors_exit_2_before_anything_runs(
    args: list[str], words: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _out, err = run_cli(args)
    assert code == 2
    for word in words:
        assert word in err
    assert list(tmp_path.iterdir()) == []  # no database, no report


def _llm_backend(tmp_path: Path, backend: str, capacity: bool = True) -> Path:
    """Scenario 6 with its LLM workload on ``backend`` (and without its capacity search,
    at a fixed rate, when not ``capacity``), in a folder of its own."""
    text = (Path(__file__).resolve().parents[2] / "scenarios" / "mig_4g_2g_1g.yaml").read_text()
    text = text.replace(
        "  - name: llm-server\n    model: llm\n",
        f"  - name: llm-server\n    model: llm\n    backend: {backend}\n"
        + ("    url: http://127.0.0.1:9/v1\n" if backend == "openai" else ""))
    if not capacity:
        text = re.sub(r"    capacity: \{[^}]*\}\n", "    target_qps: 5\n", text)
    assert f"backend: {backend}" in text and ("capacity:" in text) == capacity
    given = tmp_path / "given" / "s6.yaml"
    given.parent.mkdir(exist_ok=True)
    given.write_text(text)
    return given


@pytest.mark.parametrize(("backend", "capacity"), [("openai", True), ("openai", False),
                                                   ("torch", False)])
def test_a_slowdown_of_an_llm_engine_that_cannot_be_slowed_exits_2(
        backend: str, capacity: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    given = _llm_backend(tmp_path, backend, capacity)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    code, _out, err = run_cli(["bench", str(given), "--inject-slowdown", "10"])
    assert code == 2, err
    assert f"{given} workloads[2].backend" in " ".join(err.split())
    assert f"not backend {backend} (llm-server)" in err
    assert "fix: leave --inject-slowdown out" in err
    assert list(work.iterdir()) == []  # no database, no report


def test_slowable_workloads_pass_the_slowdown_check(tmp_path: Path) -> None:
    from vgpu.cli.checks import check_slowdown
    from vgpu.model import load_scenario

    openai = load_scenario(_llm_backend(tmp_path, "openai"))
    check_slowdown(openai, ["resnet50-offline", "bert-offline"], 10.0)  # the others chosen
    check_slowdown(openai, None, None)  # no slowdown asked for
    # torch's capacity search measures the loopback server of the ONNX Runtime engine
    check_slowdown(load_scenario(_llm_backend(tmp_path, "torch")), None, 10.0)
    with pytest.raises(InputError, match=r"workloads\[2\]\.backend"):
        check_slowdown(openai, ["llm-server"], 10.0)


def test_results_without_a_database(tmp_path: Path) -> None:
    code, _out, err = run_cli(["results", "--db", str(tmp_path / "none.db")])
    assert code == 2 and "no results database here" in err
    assert not (tmp_path / "none.db").exists()


def test_compare_needs_exactly_one_reference(db: Path) -> None:
    code, _out, err = run_cli(["compare", "1", "--db", str(db)])
    assert code == 2 and "give exactly one of them" in err
    code, _out, err = run_cli(["compare", "1", "3", "--kind", "sideways", "--db", str(db)])
    assert code == 2 and "--kind" in err


def test_compare_json_and_fail_exit_code(db: Path) -> None:
    code, out, _err = run_cli(["compare", "1", "3", "--db", str(db), "--json"])
    verdict = json.loads(out)
    assert verdict["kind"] == "vm-vs-bare-metal"
    assert verdict["checks"][0]["difference_pct"] == pytest.approx((100.5 / 80.5 - 1) * 100)
    assert (verdict["verdict"], code) == ("PASS", 0)
    code, out, _err = run_cli(["compare", "3", "1", "--db", str(db)])
    assert code == 3 and "FAIL" in out


def test_references_file_errors_name_the_file_and_field(db: Path, tmp_path: Path) -> None:
    refs = tmp_path / "refs.yaml"
    refs.write_text("system_throughput: {value: fast}\n")
    code, _out, err = run_cli(["compare", "1", "--references", str(refs), "--db", str(db)])
    assert code == 2 and "refs.yaml system_throughput.value" in err
    refs.write_text("nonsense: {value: 1}\n")
    code, _out, err = run_cli(["compare", "1", "--references", str(refs), "--db", str(db)])
    assert code == 2 and "no metric nonsense" in err
    refs.write_text("system_throughput: {value: 100, lower: -0.5, upper: 0.5}\n")
    code, out, _err = run_cli(["compare", "1", "--references", str(refs), "--db", str(db)])
    assert code == 0 and "PASS" in out


def test_baseline_set_and_list(db: Path) -> None:
    code, out, _err = run_cli(["baseline", "set", "3", "--name", "bm", "--db", str(db)])
    assert code == 0 and "2 ok run(s): 3, 4" in out
    code, out, _err = run_cli(["baseline", "list", "--db", str(db)])
    assert "bm: run 3" in out
    code, _out, err = run_cli(["baseline", "set", "42", "--db", str(db)])
    assert code == 2 and "no run 42" in err


def test_a_simulated_gpu_is_refused_where_a_real_one_is(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from vgpu.targets import devices

    monkeypatch.chdir(tmp_path)
    gpu = devices.LocalDevice(kind="gpu", name="NVIDIA H200", index=0, uuid="GPU-1")
    monkeypatch.setattr(devices, "discover", lambda backend=None: [gpu])
    code, _out, err = run_cli(["bench", "--scenario", "6", "--simulated-gpu"])
    assert code == 2
    assert "--simulated-gpu" in err and "this machine has a GPU (NVIDIA H200)" in err
    assert list(tmp_path.iterdir()) == []  # no database, no report

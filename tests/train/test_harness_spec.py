"""Bad training specs are refused before any work: exit 2, message names file and field."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the train extra (torch) is not installed")

from loadgen.errors import SpecError
from loadgen.train.spec import parse_allreduce_spec, parse_train_spec

pytestmark = pytest.mark.train


def _run(command: str, spec_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loadgen.train", command, str(spec_path), *extra],
        capture_output=True, text=True, timeout=120, check=False,
    )


def test_bad_spec_exits_2_naming_file_field_and_fix(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"schema_version": 1, "model": "vgg16", "batch_size": 8}))
    done = _run("train", spec, "--out", str(tmp_path / "out"))
    assert done.returncode == 2
    assert str(spec) in done.stderr and "model" in done.stderr and "fix:" in done.stderr
    assert not (tmp_path / "out").exists()  # nothing was done


def test_check_flag_accepts_a_good_spec_and_reports_torch(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"schema_version": 1, "model": "resnet-tiny"}))
    done = _run("train", spec, "--check")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["spec"] == "ok"


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"batch_size": 0}, "batch_size", "must be >= 1"),
        ({"precision": "fp16", "device": "cpu"}, "precision", "needs a GPU"),
        ({"backend": "nccl"}, "backend", "nccl needs GPUs"),
        ({"measured_steps": 2.5}, "measured_steps", "must be an integer"),
        ({"shuffle": True}, "shuffle", "unknown field"),
        ({"schema_version": 7}, "schema_version", "must be 1"),
    ],
)
def test_train_spec_field_errors(fields: dict[str, object], field: str, words: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_train_spec({"schema_version": 1, **fields}, "job.json")
    assert [p.field for p in caught.value.problems] == [field]
    assert words in str(caught.value) and "job.json" in str(caught.value)


def test_train_spec_reports_every_problem_at_once() -> None:
    with pytest.raises(SpecError) as caught:
        parse_train_spec({"schema_version": 1, "model": "bert", "batch_size": 0,
                          "backend": "nccl", "shufle": True}, "job.json")
    assert caught.value.exit_code == 2
    assert [p.field for p in caught.value.problems] == ["shufle", "backend", "model",
                                                        "batch_size"]


def test_allreduce_sizes_must_be_whole_elements() -> None:
    with pytest.raises(SpecError) as caught:
        parse_allreduce_spec({"schema_version": 1, "sizes_bytes": [1024, 1026]}, "probe.json")
    assert [p.field for p in caught.value.problems] == ["sizes_bytes[1]"]
    spec = parse_allreduce_spec(
        {"schema_version": 1, "sizes_bytes": [4096], "dtype": "bfloat16"}, "probe.json"
    )
    assert spec.sizes_bytes == (4096,)

"""Backend torch in the run spec and without torch: what the reader accepts and refuses,
the I/O the torch models declare, and a clear error where torch is not installed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loadgen.contract import INFERENCE_BACKENDS, BackendSpec, InferenceRunSpec, ModelSpec
from loadgen.errors import SpecError
from loadgen.models import build_model, builtin_model_io, read_model_io
from loadgen.spec import parse_spec
from tests.loadgen.harness_helpers import ROOT, base_spec, run_cli

# Runs Python with every import of torch refused, as on a node without it.
NO_TORCH = "import sys; sys.modules['torch'] = None; "


def torch_doc(tmp_path: Path, **backend: Any) -> dict[str, Any]:
    return base_spec(tmp_path, backend={"name": "torch", **backend})


def problems_of(doc: dict[str, Any], tmp_path: Path) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as caught:
        parse_spec(doc, "spec.json", tmp_path)
    return [(p.field, p.message) for p in caught.value.problems]


def test_torch_is_a_backend_of_the_contract(tmp_path: Path) -> None:
    assert "torch" in INFERENCE_BACKENDS
    spec = InferenceRunSpec(model=ModelSpec("bert", "tiny"), backend=BackendSpec("torch", 2))
    assert spec.to_json()["backend"] == {"name": "torch", "threads": 2}
    parsed = parse_spec(spec.to_json(), "s.json", tmp_path)
    assert (parsed.backend.name, parsed.backend.threads) == ("torch", 2)


@pytest.mark.parametrize("device", [{"kind": "gpu", "index": 0},
                                    {"kind": "mig", "uuid": "MIG-0a1b2c3d"}])
def test_fp16_is_accepted_on_a_gpu(tmp_path: Path, device: dict[str, Any]) -> None:
    doc = torch_doc(tmp_path, threads=4)
    doc["model"]["precision"] = "fp16"
    doc["device"] = device
    spec = parse_spec(doc, "s.json", tmp_path)
    assert (spec.model.precision, spec.device.kind) == ("fp16", device["kind"])


def test_fp16_on_the_cpu_is_refused(tmp_path: Path) -> None:
    doc = torch_doc(tmp_path)
    doc["model"]["precision"] = "fp16"
    [(field, message)] = problems_of(doc, tmp_path)
    assert field == "model.precision" and "fp16 on backend torch needs a GPU" in message


def test_triton_options_are_refused(tmp_path: Path) -> None:
    doc = torch_doc(tmp_path, url="localhost:8001", protocol="grpc", model_name="m",
                    in_flight=2)
    fields = [field for field, _ in problems_of(doc, tmp_path)]
    assert fields == ["backend.url", "backend.protocol", "backend.model_name",
                      "backend.in_flight"]


def test_an_onnx_file_is_refused(tmp_path: Path) -> None:
    model = build_model("resnet50", "tiny", "fp32", tmp_path)
    doc = torch_doc(tmp_path)
    doc["model"] = {"name": str(model)}
    [(field, message)] = problems_of(doc, tmp_path)
    assert field == "model.name" and "only the built-in models" in message


def test_fp16_on_the_cpu_exits_2_from_the_command_line(tmp_path: Path) -> None:
    doc = torch_doc(tmp_path)
    doc["model"]["precision"] = "fp16"
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(doc))
    done = run_cli("run", str(spec), "--out", str(tmp_path / "out"))
    assert done.returncode == 2
    assert "model.precision: fp16 on backend torch needs a GPU" in done.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("model", ["resnet50", "bert"])
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_torch_models_declare_the_onnx_models_io(model_cache: Path, model: str,
                                                  precision: str) -> None:
    onnx_io = read_model_io(build_model(model, "tiny", precision, model_cache))
    assert builtin_model_io(model, "tiny", precision) == onnx_io


def test_the_harness_imports_without_torch() -> None:
    code = (NO_TORCH + "import loadgen.runner, loadgen.backends.pytorch, loadgen.spec; "
            "from loadgen.versions import version_info; print(version_info()['torch'])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "None"


def test_a_torch_spec_without_torch_fails_with_a_clear_reason(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(torch_doc(tmp_path)))
    out = tmp_path / "out"
    code = (NO_TORCH + "from loadgen.__main__ import main; "
            f"sys.exit(main(['run', {str(spec)!r}, '--out', {str(out)!r}]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 1, done.stderr
    record = json.loads((out / "result.json").read_text())
    assert record["status"] == "failed"
    assert record["reason"].startswith("backend torch needs PyTorch, which ")
    assert "install torch" in record["reason"]

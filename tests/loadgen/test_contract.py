"""The harness contract (loadgen.contract): specs built from its types go through the
harness's readers unchanged, its names are the only ones either side uses, and it is the
only part of loadgen that vgpu imports."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args

import pytest

from loadgen import contract
from loadgen.contract import (
    AllreduceRunSpec,
    BackendSpec,
    DeviceSpec,
    InferenceRunSpec,
    LoadgenSpec,
    ModelSpec,
    TrainRunSpec,
)
from loadgen.errors import SpecError
from loadgen.spec import parse_spec
from loadgen.train.spec import parse_allreduce_spec, parse_train_spec
from vgpu.bench.workload import CPU_VARIANT
from vgpu.model.scenario import InferenceWorkload, TrainingWorkload

ROOT = Path(__file__).resolve().parents[2]


def _through_json(spec: Any) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(json.dumps(spec.to_json()))
    return document


def _inference_specs(tmp_path: Path) -> list[InferenceRunSpec]:
    resnet = ModelSpec("resnet50", "tiny", "fp16", None, contract.INPUT_NAMES["resnet50"])
    bert = ModelSpec("bert", "base", "fp32", None, contract.INPUT_NAMES["bert"])
    return [
        InferenceRunSpec(model=resnet, backend=BackendSpec("onnxruntime", threads=2)),
        InferenceRunSpec(
            model=bert,
            backend=BackendSpec("triton", None, "node-1:8000", "http", "bert", 4),
            device=DeviceSpec("mig", uuid="MIG-0b9e4a5c-1111-2222-3333-444455556666"),
            loadgen=LoadgenSpec("Server", target_qps=250.0, target_latency_ms=130.0,
                                max_duration_ms=120000, min_query_count=100),
            batch_size=8, seed=3, warmup_queries=0, instance_name="vm-1",
            cache_dir=str(tmp_path / "models"),
        ),
        InferenceRunSpec(
            model=resnet, device=DeviceSpec("gpu", index=1),
            loadgen=LoadgenSpec("MultiStream", samples_per_query=8,
                                performance_sample_count=64),
        ),
    ]


def test_inference_specs_round_trip_through_the_harness_reader(tmp_path: Path) -> None:
    for spec in _inference_specs(tmp_path):
        assert parse_spec(_through_json(spec), "contract", tmp_path) == spec


def test_an_onnx_file_round_trips_by_its_path(tmp_path: Path) -> None:
    from loadgen.models import build_model

    path = str(build_model("resnet50", "tiny", "fp32", tmp_path))
    spec = InferenceRunSpec(model=ModelSpec(path, None, "as-exported", path, ("input",)))
    assert parse_spec(_through_json(spec), "contract", tmp_path) == spec


def test_a_spec_built_with_defaults_is_filled_in_by_the_reader(tmp_path: Path) -> None:
    built = InferenceRunSpec(model=ModelSpec("bert", precision="fp16"),
                             backend=BackendSpec("triton"))
    parsed = parse_spec(_through_json(built), "contract", tmp_path)
    assert (parsed.model.variant, parsed.model.input_names) == (
        contract.DEFAULT_VARIANT["bert"], contract.INPUT_NAMES["bert"])
    assert (parsed.backend.url, parsed.backend.in_flight) == ("localhost:8001", 2)
    assert parse_spec(_through_json(parsed), "contract", tmp_path) == parsed


@pytest.mark.parametrize("spec", [
    TrainRunSpec(),
    TrainRunSpec(model="resnet-tiny", image_size=32, batch_size=8, precision="bf16",
                 backend="gloo", device="cpu", warmup_steps=0, measured_steps=2,
                 comm_probe_steps=0, learning_rate=0.1, threads=2, seed=5,
                 collective_timeout_s=60.0, instance_name="train-1"),
    TrainRunSpec(precision="fp16", backend="nccl", device="gpu"),
])
def test_training_specs_round_trip_through_the_harness_reader(spec: TrainRunSpec) -> None:
    assert parse_train_spec(_through_json(spec), "contract") == spec


@pytest.mark.parametrize("spec", [
    AllreduceRunSpec(),
    AllreduceRunSpec(sizes_bytes=(4096, 1 << 20), iterations=3, warmup_iterations=0,
                     backend="gloo", dtype="bfloat16", instance_name="probe"),
])
def test_allreduce_specs_round_trip_through_the_harness_reader(spec: AllreduceRunSpec) -> None:
    assert parse_allreduce_spec(_through_json(spec), "contract") == spec


def test_both_readers_raise_the_same_error_with_every_problem(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as inference:
        parse_spec({"schema_version": 2, "model": {"name": "gpt2"}, "seed": -1}, "a.json",
                   tmp_path)
    with pytest.raises(SpecError) as training:
        parse_train_spec({"schema_version": 2, "model": "bert", "seed": -1}, "b.json")
    assert [p.field for p in inference.value.problems] == ["schema_version", "model.name",
                                                           "seed"]
    assert [p.field for p in training.value.problems] == ["schema_version", "model", "seed"]
    assert inference.value.exit_code == training.value.exit_code == 2


def _literal(model: Any, field: str) -> tuple[str, ...]:
    return get_args(model.model_fields[field].annotation)


def test_scenario_name_sets_are_the_contracts() -> None:
    assert _literal(InferenceWorkload, "scenario") == contract.LOADGEN_SCENARIOS
    assert _literal(InferenceWorkload, "precision") == contract.INFERENCE_PRECISIONS
    assert _literal(InferenceWorkload, "backend") == contract.INFERENCE_BACKENDS
    assert _literal(TrainingWorkload, "model") == contract.TRAINING_MODELS
    assert _literal(TrainingWorkload, "precision") == contract.TRAINING_PRECISIONS
    assert _literal(TrainingWorkload, "comm_backend") == contract.COMM_BACKENDS
    assert set(contract.COMM_BACKENDS) < set(contract.TRAINING_BACKENDS)
    assert set(CPU_VARIANT) == set(contract.INFERENCE_MODELS)
    assert all(v in contract.INFERENCE_VARIANTS[m] for m, v in CPU_VARIANT.items())


def test_scenario_inference_models_and_variants_are_the_contracts() -> None:
    for model, variants in contract.INFERENCE_VARIANTS.items():
        for variant in variants:
            # llm's llama-sized variants run only behind a serving endpoint
            served = {"backend": "openai", "url": "http://vllm:8000"} \
                if model == contract.LLM_MODEL and variant != "tiny" else {}
            InferenceWorkload(model=model, variant=variant, **served)
        with pytest.raises(ValueError, match="is not one of"):
            InferenceWorkload(model=model, variant="huge")
    InferenceWorkload(model=f"mine{contract.ONNX_SUFFIX}")
    with pytest.raises(ValueError, match="is not a model"):
        InferenceWorkload(model="resnet-tiny")


def test_a_training_model_no_trainer_has_is_refused() -> None:
    for model in contract.TRAINING_MODELS:
        TrainingWorkload(model=model)
    with pytest.raises(ValueError, match="no trainer for model 'bert'"):
        TrainingWorkload(model="bert")  # type: ignore[arg-type]


def test_harness_catalogues_use_the_contracts_names() -> None:
    from loadgen.models import bert, catalog, resnet50

    assert set(catalog.BUILDERS) == set(contract.INFERENCE_MODELS)
    assert tuple(resnet50.VARIANTS) == contract.INFERENCE_VARIANTS["resnet50"]
    assert tuple(bert.VARIANTS) == contract.INFERENCE_VARIANTS["bert"]
    assert tuple(catalog.PRECISIONS) == contract.INFERENCE_PRECISIONS
    assert tuple(contract.TRAINING_SHAPES) == contract.TRAINING_MODELS
    assert set(contract.ALLREDUCE_DTYPE_BYTES) == set(contract.ALLREDUCE_DTYPES)
    assert set(contract.DEFAULT_VARIANT) == set(contract.INPUT_NAMES) == set(
        contract.INFERENCE_MODELS)


def test_the_contract_imports_only_the_standard_library() -> None:
    code = ("import sys; before = set(sys.modules); import loadgen.contract; "
            "print(' '.join({m.split('.')[0] for m in set(sys.modules) - before} "
            "- sys.stdlib_module_names))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=ROOT)
    assert set(done.stdout.split()) == {"loadgen"}


def _imports(path: Path) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
    return found


def test_vgpu_imports_only_the_contract_and_loadgen_never_imports_vgpu() -> None:
    from_vgpu = {(str(path.relative_to(ROOT)), name)
                 for path in (ROOT / "vgpu").rglob("*.py") for name in _imports(path)
                 if name.split(".")[0] == "loadgen"}
    assert {name for _, name in from_vgpu} <= {"loadgen", "loadgen.contract"}, from_vgpu
    assert _imports(ROOT / "loadgen" / "__init__.py") == ["__future__", "loadgen.contract"]
    from_loadgen = [(path, name) for path in (ROOT / "loadgen").rglob("*.py")
                    for name in _imports(path) if name.split(".")[0] == "vgpu"]
    assert from_loadgen == []

from __future__ import annotations

from pathlib import Path

import pytest

from loadgen.spec import parse_spec
from vgpu import catalog
from vgpu.bench.workload import BenchOverrides, effective_workload, harness_spec
from vgpu.model.scenario import InferenceWorkload


def _resnet(**fields: object) -> InferenceWorkload:
    return InferenceWorkload(model="resnet50", scenario="Offline", batch=64, precision="fp16",
                             duration_s=600, **fields)


def test_cpu_run_shrinks_model_and_duration_and_says_so() -> None:
    effective = effective_workload(_resnet(), on_cpu=True, overrides=BenchOverrides())
    assert (effective.variant, effective.duration_s, effective.precision) == ("tiny", 3, "fp16")
    assert effective.key == "resnet50-offline (resnet50/tiny fp16 Offline b64 onnxruntime)"
    assert any("'tiny' variant" in n for n in effective.notes)
    assert any("600 s -> 3 s" in n and "cpu_duration_s" in n for n in effective.notes)


def test_gpu_run_keeps_the_scenario_and_explicit_choices_win() -> None:
    on_gpu = effective_workload(_resnet(), on_cpu=False, overrides=BenchOverrides())
    assert (on_gpu.variant, on_gpu.duration_s, on_gpu.notes) == (None, 600, [])
    explicit = effective_workload(_resnet(variant="full"), on_cpu=True,
                                  overrides=BenchOverrides(duration_s=3))
    assert (explicit.variant, explicit.duration_s) == ("full", 3)
    assert explicit.notes == ["duration 600 s -> 3 s (--duration)",
                              "CPU only: warm-up windows must agree within 15% (on a GPU 5%): "
                              "shared CPU cores are noisier"]
    assert (on_gpu.stability_pct, explicit.stability_pct) == (5.0, 15.0)
    pinned = effective_workload(_resnet(stability_pct=2.5), on_cpu=True,
                                overrides=BenchOverrides(duration_s=40))
    assert pinned.stability_pct == 2.5 and not any("warm-up" in n for n in pinned.notes)
    window = harness_spec(pinned, instance="i", device={"kind": "cpu"}, threads=1).stability
    assert window is not None and (window.pct, window.window_ms, window.max_windows) == (
        2.5, 1000, 6)
    full = effective_workload(_resnet(), on_cpu=True, overrides=BenchOverrides(full_models=True))
    assert full.variant is None


def test_harness_spec_is_accepted_by_the_harness_validator(tmp_path: Path) -> None:
    effective = effective_workload(_resnet(), on_cpu=True, overrides=BenchOverrides())
    spec = harness_spec(effective, instance="s6-2g", device={"kind": "cpu"}, threads=1,
                        target_qps=1234.5, cache_dir=str(tmp_path))
    parsed = parse_spec(spec.to_json(), "bench", tmp_path)
    assert parsed.instance_name == "s6-2g"
    assert (parsed.model.name, parsed.model.variant, parsed.model.precision) == (
        "resnet50", "tiny", "fp16")
    assert parsed.backend.threads == 1
    assert parsed.loadgen.min_duration_ms == 3_000
    assert parsed.loadgen.target_qps == pytest.approx(1234.5)
    assert parsed.batch_size == 64


def test_every_catalogue_inference_workload_makes_a_valid_spec(tmp_path: Path) -> None:
    checked = 0
    for entry in catalog.catalogue():
        for workload in catalog.load(entry.id).workloads:
            if not isinstance(workload, InferenceWorkload):
                continue
            for on_cpu in (True, False):
                effective = effective_workload(workload, on_cpu, BenchOverrides())
                device = {"kind": "cpu"} if on_cpu else {"kind": "mig", "uuid": "MIG-x"}
                spec = harness_spec(effective, instance="i", device=device, threads=None)
                parse_spec(spec.to_json(), "bench", tmp_path)
                checked += 1
    assert checked >= 16


def test_torch_fp16_on_a_cpu_runs_fp32_and_says_so(tmp_path: Path) -> None:
    workload = InferenceWorkload(model="resnet50", backend="torch", precision="fp16")
    on_cpu = effective_workload(workload, on_cpu=True, overrides=BenchOverrides())
    assert on_cpu.precision == "fp32"
    assert any("torch runs fp16 on CUDA only" in n for n in on_cpu.notes)
    spec = harness_spec(on_cpu, instance="i", device={"kind": "cpu"}, threads=1).to_json()
    assert parse_spec(spec, base=tmp_path).model.precision == "fp32"
    on_gpu = effective_workload(workload, on_cpu=False, overrides=BenchOverrides())
    assert on_gpu.precision == "fp16"

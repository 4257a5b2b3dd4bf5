"""Harness against raw loop on the GPU: both run in their own processes with the suite's
device bound, the raw loop first (its rate sets the Offline target), then
``python -m loadgen run`` with backend torch on the same model, precision and batch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.gpu.gpuhost import GpuHost
from tests.gpu.rawloop import INPUT_SEED, WARMUP_BATCHES

ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 300
RAW_SECONDS = 8.0
HARNESS_SECONDS = 10.0


@dataclass(frozen=True)
class Workload:
    model: str
    variant: str
    precision: str
    batch: int

    @property
    def label(self) -> str:
        return f"{self.model}_{self.variant}_{self.precision}_b{self.batch}"


RESNET50_FP16 = Workload("resnet50", "full", "fp16", 32)
BERT_LARGE_FP16 = Workload("bert", "large", "fp16", 16)
SWEEP_SECONDS = 1.5  # per candidate batch size of the probe


def batch_sweep(host: GpuHost, work: Workload, batches: tuple[int, ...],
                seconds: float = SWEEP_SECONDS) -> dict[str, Any]:
    """The raw loop at each candidate batch size and the size chosen for this device
    (loadgen.batchsize): {"rates": {batch: samples/s}, "chosen": batch, ...}."""
    return json_line(run_module(host, "tests.gpu.rawloop", "sweep", work.model, work.variant,
                                work.precision, ",".join(str(b) for b in batches),
                                str(seconds)))


@dataclass(frozen=True)
class Comparison:
    workload: Workload
    raw: dict[str, Any]
    record: dict[str, Any]

    @property
    def harness_rate(self) -> float:
        return float(self.record["throughput"]["samples_per_second"])

    @property
    def ratio(self) -> float:
        return self.harness_rate / float(self.raw["samples_per_second"])

    def figures(self) -> dict[str, Any]:
        return {
            "raw_samples_per_second": self.raw["samples_per_second"],
            "harness_samples_per_second": self.harness_rate,
            "ratio_harness_to_raw": self.ratio,
            "batch_size": self.workload.batch,
            "validity": self.record["validity"]["result"],
            "execution_provider": self.record["device"]["execution_provider"],
            "sample_count": self.record["sample_count"],
        }


def bound_env(host: GpuHost) -> dict[str, str]:
    return {**os.environ, "CUDA_VISIBLE_DEVICES": host.cuda_visible_devices}


def run_module(host: GpuHost, *args: str, timeout: float = RUN_TIMEOUT_S
               ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, env=bound_env(host),
                          capture_output=True, text=True, timeout=timeout)


def json_line(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    if done.returncode != 0:
        raise AssertionError(f"{done.args} exited {done.returncode}:\n{done.stderr[-4000:]}")
    data: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return data


def raw_rate(host: GpuHost, work: Workload, seconds: float = RAW_SECONDS) -> dict[str, Any]:
    return json_line(run_module(host, "tests.gpu.rawloop", "measure", work.model,
                                work.variant, work.precision, str(work.batch), str(seconds)))


def harness_doc(host: GpuHost, work: Workload, seconds: float,
                target_qps: float) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "model": {"name": work.model, "variant": work.variant, "precision": work.precision},
        "backend": {"name": "torch"},
        "device": host.device,
        "loadgen": {"scenario": "Offline", "mode": "PerformanceOnly",
                    "min_duration_ms": round(seconds * 1000), "target_qps": target_qps,
                    "performance_sample_count": 256},
        "batch_size": work.batch,
        "seed": INPUT_SEED,
        "warmup_queries": WARMUP_BATCHES,
        "instance_name": f"gpu-check-{work.label}",
    }


def harness_run(host: GpuHost, doc: dict[str, Any], out: Path
                ) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    out.mkdir(parents=True, exist_ok=True)
    spec = out / "spec.json"
    spec.write_text(json.dumps(doc, indent=2))
    done = run_module(host, "loadgen", "run", str(spec), "--out", str(out))
    result = out / "result.json"
    if not result.exists():
        raise AssertionError(f"no result.json (exit {done.returncode}):\n{done.stderr[-4000:]}")
    record: dict[str, Any] = json.loads(result.read_text())
    return done, record


def compare(host: GpuHost, work: Workload, out: Path, seconds: float = HARNESS_SECONDS,
            raw_seconds: float = RAW_SECONDS) -> Comparison:
    raw = raw_rate(host, work, raw_seconds)
    doc = harness_doc(host, work, seconds, float(raw["samples_per_second"]))
    done, record = harness_run(host, doc, out)
    if done.returncode != 0 or record["status"] != "ok":
        raise AssertionError(f"harness run failed (exit {done.returncode}): "
                             f"{record.get('reason')}\n{done.stderr[-4000:]}")
    return Comparison(work, raw, record)

"""ONNX Runtime in-process backend: picks the best provider present (TensorRT, CUDA, CPU),
records the one really used, and uses IO binding when the session runs on a GPU."""

from __future__ import annotations

from typing import Any

import numpy as np

from loadgen.backends.base import Done, Feeds
from loadgen.errors import RunFailed

GPU_PROVIDERS = ("TensorrtExecutionProvider", "CUDAExecutionProvider")
CPU_PROVIDER = "CPUExecutionProvider"


def choose_providers(device_kind: str, available: list[str]) -> list[str]:
    if device_kind == "cpu":
        return [CPU_PROVIDER]
    gpu = [p for p in GPU_PROVIDERS if p in available]
    if not gpu:
        raise RunFailed(
            f"device.kind {device_kind} needs onnxruntime's CUDA or TensorRT provider, but this "
            f"onnxruntime has only {available}: install onnxruntime-gpu on this host"
        )
    return [*gpu, CPU_PROVIDER]


class OrtBackend:
    name = "onnxruntime"
    concurrency = 1

    def __init__(self, model_path: str, threads: int | None, device_kind: str) -> None:
        import onnxruntime as ort  # imported here: the device binding must come first

        self._ort = ort
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or 0
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.available = ort.get_available_providers()
        requested = choose_providers(device_kind, self.available)
        self.session = ort.InferenceSession(model_path, options, providers=requested)
        self.provider = self.session.get_providers()[0]
        if device_kind != "cpu" and self.provider == CPU_PROVIDER:
            raise RunFailed(f"onnxruntime fell back to the CPU although device.kind is "
                            f"{device_kind}: the GPU provider failed to start (check the "
                            f"driver and CUDA_VISIBLE_DEVICES)")
        self.output_names = [o.name for o in self.session.get_outputs()]
        self.threads = threads
        self._on_gpu = self.provider in GPU_PROVIDERS

    def infer(self, feeds: Feeds) -> list[np.ndarray]:
        if not self._on_gpu:
            return self.session.run(self.output_names, feeds)
        # IO binding: outputs are allocated on the device and copied back once.
        binding = self.session.io_binding()
        for name, array in feeds.items():
            binding.bind_cpu_input(name, array)
        for name in self.output_names:
            binding.bind_output(name, "cuda")
        self.session.run_with_iobinding(binding)
        return list(binding.copy_outputs_to_cpu())

    def submit(self, feeds: Feeds, done: Done) -> None:
        try:
            outputs = self.infer(feeds)
        except Exception as exc:
            done(None, exc)
            return
        done(outputs, None)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "onnxruntime_version": self._ort.__version__,
            "execution_provider": self.provider,
            "providers_available": self.available,
            "intra_op_threads": self.threads,
            "io_binding": self._on_gpu,
        }

    def mark_statistics_start(self) -> None:
        return None

    def statistics(self) -> dict[str, Any] | None:
        return None

    def close(self) -> None:
        return None

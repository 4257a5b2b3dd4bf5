"""ONNX Runtime in-process backend. On a GPU it runs the CUDA provider (TensorRT only when
the spec asks for it, then with fp16 for fp16 models and its engines cached under the
cache dir), records the provider really used, and feeds the session through one reused
IO binding: the samples are copied to the device once, and each batch is gathered there
by a small Gather session, so only the batch's row numbers cross the bus on the way in."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from loadgen.backends.base import Done, Feeds
from loadgen.errors import RunFailed

TENSORRT_PROVIDER = "TensorrtExecutionProvider"
CUDA_PROVIDER = "CUDAExecutionProvider"
GPU_PROVIDERS = (TENSORRT_PROVIDER, CUDA_PROVIDER)
CPU_PROVIDER = "CPUExecutionProvider"
ORT_PROVIDERS = {"cuda": CUDA_PROVIDER, "tensorrt": TENSORRT_PROVIDER}
DEFAULT_GPU_PROVIDER = "cuda"
TENSORRT_CACHE = "tensorrt"
# Samples kept on the device up to this size; a larger dataset is copied in per batch.
RESIDENT_SAMPLES_MAX_BYTES = 4 * 1024**3
# ORT's worker threads spin while idle by default: on a GPU session they only burn the
# CPU that other instances (MIG slices of the same host) need for their SUTs.
NO_SPINNING = ("session.intra_op.allow_spinning", "session.inter_op.allow_spinning")

# TF32 for fp32 is the CUDA provider's default; said explicitly, as backend torch sets it.
# cuDNN's convolution algorithms come from its heuristics, not from a search timed in each
# process (the provider's default, EXHAUSTIVE), so that two runs of one configuration on
# one GPU, driver and cuDNN run the same kernels.
CUDA_OPTIONS = {"device_id": "0", "use_tf32": "1", "cudnn_conv_algo_search": "HEURISTIC"}
# The CUDA provider replays each batch size's run as a CUDA graph (its inputs and outputs
# bound at fixed device addresses); a model the provider cannot capture whole (nodes left
# to the CPU) runs without, and the record says why. VGPU_ORT_CUDA_GRAPH=0 turns it off.
CUDA_GRAPH_OPTION = {"enable_cuda_graph": "1"}
CUDA_GRAPH_ENV = "VGPU_ORT_CUDA_GRAPH"
GRAPH_ID_ENTRY = "gpu_graph_id"
ORT_NUMPY_TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16,
                   "tensor(int64)": np.int64, "tensor(int32)": np.int32,
                   "tensor(double)": np.float64, "tensor(bool)": np.bool_}

ProviderList = list[tuple[str, dict[str, str]]]


def tensorrt_options(fp16: bool, cache_dir: Path) -> dict[str, str]:
    """TensorRT builds an engine per model and shape, minutes for BERT-large: cache it."""
    return {"device_id": "0", "trt_fp16_enable": str(fp16), "trt_engine_cache_enable": "True",
            "trt_engine_cache_path": str(cache_dir), "trt_timing_cache_enable": "True",
            "trt_timing_cache_path": str(cache_dir)}


def started_provider(session: Any, device_kind: str) -> str:
    """The provider the session really runs on; RunFailed where ONNX Runtime fell back to
    the CPU for a GPU or MIG device (it does so quietly when the CUDA provider fails)."""
    provider = str(session.get_providers()[0])
    if device_kind != "cpu" and provider == CPU_PROVIDER:
        raise RunFailed(f"onnxruntime fell back to the CPU although device.kind is "
                        f"{device_kind}: the GPU provider failed to start (check the "
                        f"driver and CUDA_VISIBLE_DEVICES)")
    return provider


def choose_providers(device_kind: str, available: list[str], provider: str | None = None,
                     fp16: bool = False, cache_dir: Path | None = None) -> ProviderList:
    """The providers to ask for, each with its options: the CPU alone on ``cpu``; on a GPU
    the CUDA provider, or TensorRT (CUDA then CPU behind it for the nodes it leaves) when
    ``provider`` is ``tensorrt``."""
    if device_kind == "cpu":
        return [(CPU_PROVIDER, {})]
    wanted = ORT_PROVIDERS[provider or DEFAULT_GPU_PROVIDER]
    if wanted not in available:
        raise RunFailed(
            f"device.kind {device_kind} needs onnxruntime's {wanted} (backend.provider "
            f"{provider or DEFAULT_GPU_PROVIDER}), but this onnxruntime has only "
            f"{available}: install onnxruntime-gpu on this host"
            + (" and TensorRT's libraries, or remove backend.provider"
               if wanted == TENSORRT_PROVIDER else ""))
    chosen: ProviderList = []
    if wanted == TENSORRT_PROVIDER:
        chosen.append((TENSORRT_PROVIDER, tensorrt_options(fp16, cache_dir or Path(
            TENSORRT_CACHE))))
    if CUDA_PROVIDER in available:
        chosen.append((CUDA_PROVIDER, CUDA_OPTIONS))
    return [*chosen, (CPU_PROVIDER, {})]


def preload_cuda_libraries(ort: Any) -> bool:
    """onnxruntime-gpu from PyPI finds CUDA and cuDNN only in the nvidia-* wheels' folders
    (site-packages/nvidia/cu13/lib for the CUDA 13 build), which the loader does not search:
    ``preload_dlls`` (onnxruntime >= 1.21) loads them before a GPU session is made."""
    preload = getattr(ort, "preload_dlls", None)
    if preload is None:
        return False
    preload()
    return True


def session_options(ort: Any, threads: int | None, on_gpu: bool) -> Any:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or 0
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if on_gpu:
        for key in NO_SPINNING:
            options.add_session_config_entry(key, "0")
    return options


def gather_model(inputs: dict[str, np.ndarray]) -> bytes:
    """An ONNX model taking every sample array (``samples_<name>``) and ``rows`` and
    returning each array's rows, in the order of ``inputs``."""
    import onnx
    from onnx import helper

    rows = helper.make_tensor_value_info("rows", onnx.TensorProto.INT64, ["batch"])
    graph_inputs, outputs, nodes = [rows], [], []
    for name, array in inputs.items():
        element = helper.np_dtype_to_tensor_dtype(array.dtype)
        graph_inputs.append(helper.make_tensor_value_info(f"samples_{name}", element,
                                                          list(array.shape)))
        outputs.append(helper.make_tensor_value_info(name, element,
                                                     ["batch", *array.shape[1:]]))
        nodes.append(helper.make_node("Gather", [f"samples_{name}", "rows"], [name], axis=0))
    graph = helper.make_graph(nodes, "gather_samples", graph_inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


class BoundRunner:
    """One session fed through one IO binding in ``memory`` (``cuda`` on a GPU): after
    ``keep_samples`` the samples stay there and ``run_rows`` gathers each batch in place;
    ``run`` copies a batch in. The binding is made once and reused for every batch.

    With ``graphs`` (a session made with the CUDA provider's ``enable_cuda_graph``) every
    batch size has its own input and output buffers, bound once at fixed addresses, and its
    own graph id: ``run`` copies host feeds into those buffers rather than binding new
    ones, since a replayed graph reads the addresses it was captured with. Outputs are
    copied to the host only when wanted (``want_outputs``)."""

    def __init__(self, ort: Any, session: Any, providers: ProviderList, memory: str,
                 graphs: bool = False) -> None:
        self._ort, self.session, self.memory = ort, session, memory
        self._providers = providers
        self.graphs = graphs
        self.want_outputs = True
        self._graph_bindings: dict[int, tuple[Any, Any, list[Any]]] = {}
        self.output_names = [o.name for o in session.get_outputs()]
        self.binding = session.io_binding()
        self._gather: Any = None
        self._gather_binding: Any = None
        self._batch_inputs: dict[int, dict[str, Any]] = {}
        self._bound_size: int | None = None
        self._output_size: int | None = None

    def run(self, feeds: Feeds) -> list[np.ndarray]:
        size = len(next(iter(feeds.values())))
        if self.graphs:
            self._samples_like(feeds)
            for name, value in self._inputs_for(size).items():
                value.update_inplace(np.ascontiguousarray(feeds[name]))
            return self._run_graph(size, outputs=True)
        self._bound_size = None
        for name, array in feeds.items():
            self.binding.bind_cpu_input(name, np.ascontiguousarray(array))
        return self._run(size)

    def _samples_like(self, feeds: Feeds) -> None:
        """Dtypes and sample shapes for the static buffers before any sample is kept."""
        if not hasattr(self, "_samples"):
            self._samples = {name: array[:0] for name, array in feeds.items()}

    def _outputs_for(self, size: int) -> list[Any]:
        shapes = []
        for output in self.session.get_outputs():
            dims = [size if i == 0 else d for i, d in enumerate(output.shape)]
            if not all(isinstance(d, int) for d in dims):
                raise RunFailed(f"onnxruntime CUDA graphs need fixed output shapes; output "
                                f"{output.name!r} is {output.shape}")
            shapes.append((dims, ORT_NUMPY_TYPES[output.type]))
        return [self._ort.OrtValue.ortvalue_from_shape_and_type(dims, dtype, self.memory, 0)
                for dims, dtype in shapes]

    def _graph_binding(self, size: int) -> tuple[Any, Any, list[Any]]:
        """(binding, run options, outputs) of one batch size, bound once."""
        if size not in self._graph_bindings:
            binding = self.session.io_binding()
            for name, value in self._inputs_for(size).items():
                binding.bind_ortvalue_input(name, value)
            outputs = self._outputs_for(size)
            for name, value in zip(self.output_names, outputs, strict=True):
                binding.bind_ortvalue_output(name, value)
            options = self._ort.RunOptions()
            options.add_run_config_entry(GRAPH_ID_ENTRY, str(len(self._graph_bindings) + 1))
            self._graph_bindings[size] = (binding, options, outputs)
        return self._graph_bindings[size]

    def _run_graph(self, size: int, outputs: bool) -> list[np.ndarray]:
        binding, options, values = self._graph_binding(size)
        self.session.run_with_iobinding(binding, options)
        return [value.numpy() for value in values] if outputs else []

    @property
    def graph_batch_sizes(self) -> list[int]:
        return sorted(self._graph_bindings)

    def keep_samples(self, samples: dict[str, np.ndarray]) -> None:
        """Copies every sample to ``memory`` once and makes the Gather session for them."""
        options = self._ort.SessionOptions()
        for key in NO_SPINNING:
            options.add_session_config_entry(key, "0")
        names = [p for p, _ in self._providers if p != TENSORRT_PROVIDER]
        # Never a CUDA graph for the gather: its rows are bound afresh for every batch.
        settings = [{k: v for k, v in o.items() if k not in CUDA_GRAPH_OPTION}
                    for p, o in self._providers if p != TENSORRT_PROVIDER]
        self._gather = self._ort.InferenceSession(gather_model(samples), options,
                                                  providers=names, provider_options=settings)
        self._gather_binding = self._gather.io_binding()
        for name, array in samples.items():
            value = self._ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array),
                                                           self.memory, 0)
            self._gather_binding.bind_ortvalue_input(f"samples_{name}", value)
        self._samples = samples  # the OrtValues above keep their own copy; dtypes/shapes

    @property
    def keeps_samples(self) -> bool:
        return self._gather is not None

    def _inputs_for(self, size: int) -> dict[str, Any]:
        """Device buffers for one batch of ``size``, made once per size and reused."""
        if size not in self._batch_inputs:
            self._batch_inputs[size] = {
                name: self._ort.OrtValue.ortvalue_from_shape_and_type(
                    [size, *array.shape[1:]], array.dtype, self.memory, 0)
                for name, array in self._samples.items()}
        return self._batch_inputs[size]

    def run_rows(self, rows: np.ndarray) -> list[np.ndarray]:
        size = len(rows)
        buffers = self._inputs_for(size)
        self._gather_binding.bind_cpu_input("rows", np.ascontiguousarray(rows, dtype=np.int64))
        for name, value in buffers.items():
            self._gather_binding.bind_ortvalue_output(name, value)
        self._gather.run_with_iobinding(self._gather_binding)
        if self.graphs:
            return self._run_graph(size, outputs=self.want_outputs)
        if self._bound_size != size:
            for name, value in buffers.items():
                self.binding.bind_ortvalue_input(name, value)
            self._bound_size = size
        return self._run(size)

    def _run(self, size: int) -> list[np.ndarray]:
        if self._output_size != size:
            # The outputs of the last run stay bound at their shape: a new batch size needs
            # them unbound (allocated afresh on the device, then reused at that size).
            for name in self.output_names:
                self.binding.bind_output(name, self.memory)
            self._output_size = size
        self.session.run_with_iobinding(self.binding)
        return list(self.binding.copy_outputs_to_cpu())

    def run_rows_wanted(self, rows: np.ndarray) -> list[np.ndarray]:
        """``run_rows``, the outputs copied back only when wanted ([] otherwise)."""
        outputs = self.run_rows(rows)
        return outputs if self.want_outputs else []


def cuda_graphs_wanted() -> bool:
    return os.environ.get(CUDA_GRAPH_ENV, "") != "0"


class OrtBackend:
    name = "onnxruntime"
    concurrency = 1

    def __init__(self, model_path: str, threads: int | None, device_kind: str,
                 provider: str | None = None, precision: str = "fp32",
                 cache_dir: str | Path | None = None) -> None:
        import onnxruntime as ort  # imported here: the device binding must come first

        self._ort = ort
        on_gpu = device_kind != "cpu"
        self.preloaded_cuda = preload_cuda_libraries(ort) if on_gpu else False
        self.available = ort.get_available_providers()
        engines = Path(cache_dir) / TENSORRT_CACHE if cache_dir else None
        requested = choose_providers(device_kind, self.available, provider,
                                     precision == "fp16", engines)
        self.cuda_graph_reason: str | None = None
        graphs = on_gpu and requested[0][0] == CUDA_PROVIDER and cuda_graphs_wanted()
        self.session, requested = self._open(model_path, threads, on_gpu, requested, graphs)
        self.provider_options = dict(requested)
        self.provider = started_provider(self.session, device_kind)
        self.output_names = [o.name for o in self.session.get_outputs()]
        self.threads = threads
        self._on_gpu = self.provider in GPU_PROVIDERS
        self.cuda_graphs = graphs and self.cuda_graph_reason is None
        self._runner = BoundRunner(ort, self.session, requested, "cuda", self.cuda_graphs) \
            if self._on_gpu else None
        if not graphs and self.cuda_graph_reason is None:
            self.cuda_graph_reason = "not on the CUDA provider" if not on_gpu or \
                requested[0][0] != CUDA_PROVIDER else f"{CUDA_GRAPH_ENV}=0"

    def _open(self, model_path: str, threads: int | None, on_gpu: bool,
              requested: ProviderList, graphs: bool) -> tuple[Any, ProviderList]:
        """The session, with CUDA graphs where asked and the provider accepts the model;
        otherwise without, the reason kept."""
        ort = self._ort
        if graphs:
            with_graphs = [(requested[0][0], {**requested[0][1], **CUDA_GRAPH_OPTION}),
                           *requested[1:]]
            try:
                return ort.InferenceSession(
                    model_path, session_options(ort, threads, on_gpu),
                    providers=[p for p, _ in with_graphs],
                    provider_options=[o for _, o in with_graphs]), with_graphs
            except Exception as exc:  # nodes on the CPU: the provider refuses graphs
                self.cuda_graph_reason = f"the CUDA provider refused CUDA graphs: {exc}"
        return ort.InferenceSession(
            model_path, session_options(ort, threads, on_gpu),
            providers=[p for p, _ in requested],
            provider_options=[o for _, o in requested]), requested

    def keep_samples(self, samples: dict[str, np.ndarray]) -> bool:
        """On a GPU, the samples go to the device once (up to RESIDENT_SAMPLES_MAX_BYTES)."""
        if self._runner is None:
            return False
        if sum(array.nbytes for array in samples.values()) > RESIDENT_SAMPLES_MAX_BYTES:
            return False
        self._runner.keep_samples(samples)
        return True

    @property
    def keeps_samples(self) -> bool:
        return bool(self._runner and self._runner.keeps_samples)

    def infer(self, feeds: Feeds) -> list[np.ndarray]:
        if self._runner is None:
            return self.session.run(self.output_names, feeds)
        return self._runner.run(feeds)

    def submit(self, feeds: Feeds, done: Done) -> None:
        try:
            outputs = self.infer(feeds)
        except Exception as exc:
            done(None, exc)
            return
        done(outputs, None)

    def want_outputs(self, wanted: bool) -> None:
        """Outputs come back to the host only when the run keeps them (AccuracyOnly)."""
        if self._runner is not None:
            self._runner.want_outputs = wanted

    def submit_rows(self, rows: np.ndarray, done: Done) -> None:
        assert self._runner is not None
        try:
            outputs = self._runner.run_rows_wanted(rows)
        except Exception as exc:
            done(None, exc)
            return
        done(outputs, None)

    def describe(self) -> dict[str, Any]:
        started = self.provider_options.get(self.provider, {})
        return {
            "name": self.name,
            "onnxruntime_version": self._ort.__version__,
            "execution_provider": self.provider,
            "providers_available": self.available,
            "provider_options": started,
            "intra_op_threads": self.threads,
            "io_binding": self._on_gpu,
            "samples_on_device": self.keeps_samples,
            "cuda_libraries_preloaded": self.preloaded_cuda,
            "thread_spinning": not self._on_gpu,
            "cuda_graphs": {"enabled": self.cuda_graphs,
                            "batch_sizes": self._runner.graph_batch_sizes
                            if self._runner is not None and self.cuda_graphs else [],
                            "fallback_reason": self.cuda_graph_reason},
        }

    def mark_statistics_start(self) -> None:
        return None

    def statistics(self) -> dict[str, Any] | None:
        return None

    def close(self) -> None:
        return None

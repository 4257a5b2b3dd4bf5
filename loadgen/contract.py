"""The contract between the orchestrator (vgpu) and the node harness (loadgen): schema
versions, the names either side may use, and the run specs as frozen dataclasses.

Standard library only, so that vgpu imports it without numpy, onnx or torch. vgpu builds
specs with these types and ships ``to_json()``; the harness's readers (``loadgen.spec``,
``loadgen.train.spec``) turn a JSON document back into the same types."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

# Which backends, variants, scenarios and fields go with model llm (standard library only),
# for the scenario files' checks and the run specs' alike.
from loadgen.llm.rules import CLIENT_CONCURRENCY as CLIENT_CONCURRENCY
from loadgen.llm.rules import LLM_MODEL as LLM_MODEL
from loadgen.llm.rules import RUN_TO_TTFT as RUN_TO_TTFT
from loadgen.llm.rules import TOKEN_SCENARIOS as TOKEN_SCENARIOS
from loadgen.llm.rules import LlmProblem as LlmProblem
from loadgen.llm.rules import LlmWorkload as LlmWorkload
from loadgen.llm.rules import capacity_run_seconds as capacity_run_seconds
from loadgen.llm.rules import llm_problems as llm_problems
from loadgen.llm.rules import runs_to_resolve as runs_to_resolve

# The decoder sizes and their memory arithmetic (standard library only), for vgpu's checks.
from loadgen.llm_sizes import GIB as GIB
from loadgen.llm_sizes import RESERVED_SHARE as RESERVED_SHARE
from loadgen.llm_sizes import MemoryEstimate as MemoryEstimate
from loadgen.llm_sizes import estimate as estimate

# The result record that comes back (standard library only): parsed once where it arrives.
from loadgen.run_result import EMPTY_RESULT as EMPTY_RESULT
from loadgen.run_result import OUTPUT_TOKEN_THROUGHPUT as OUTPUT_TOKEN_THROUGHPUT
from loadgen.run_result import SERVER_SPLIT as SERVER_SPLIT
from loadgen.run_result import TOKEN_LATENCIES as TOKEN_LATENCIES
from loadgen.run_result import WARMUP_SPREAD as WARMUP_SPREAD
from loadgen.run_result import WARMUP_STABLE as WARMUP_STABLE
from loadgen.run_result import WARMUP_WINDOW as WARMUP_WINDOW
from loadgen.run_result import ResultRecordError as ResultRecordError
from loadgen.run_result import RunResult as RunResult
from loadgen.run_result import Timeline as Timeline
from loadgen.run_result import metric_unit as metric_unit
from loadgen.run_result import metrics_of as metrics_of
from loadgen.run_result import parse_run_result as parse_run_result

HARNESS_VERSION = "1.0.0"
INFERENCE_SCHEMA_VERSION = 1
TRAINING_SCHEMA_VERSION = 1
SCHEMA_VERSION = INFERENCE_SCHEMA_VERSION

# Interactive is MLPerf's LLM scenario: Server with tighter token-latency targets.
LoadgenScenario = Literal["Offline", "Server", "SingleStream", "MultiStream", "Interactive"]
LoadgenMode = Literal["PerformanceOnly", "AccuracyOnly"]
InferenceBackend = Literal["onnxruntime", "triton", "torch", "openai"]
TritonProtocol = Literal["grpc", "http"]
DeviceKind = Literal["cpu", "gpu", "mig"]
InferenceModel = Literal["resnet50", "bert", "llm"]
InferencePrecision = Literal["fp32", "fp16"]
TrainingModel = Literal["resnet50", "resnet-tiny"]
TrainingPrecision = Literal["fp32", "fp16", "bf16"]
# mpi: Open MPI through mpi4py, on CPU tensors (Horovod-style; the pip torch has no MPI
# process group)
CommBackend = Literal["nccl", "gloo", "mpi"]
TrainingBackend = Literal["auto", "nccl", "gloo", "mpi"]
TrainingDeviceKind = Literal["cpu", "gpu"]
AllreduceDtype = Literal["float32", "float16", "bfloat16"]
TrainingDataSource = Literal["synthetic", "files"]
# Page cache before a file-fed run: keep it (warm), evict the dataset's files
# (posix_fadvise DONTNEED, any user) or drop the node's (/proc/sys/vm/drop_caches, root).
TrainingDataCache = Literal["evict", "drop", "warm"]

LOADGEN_SCENARIOS: tuple[LoadgenScenario, ...] = get_args(LoadgenScenario)
LOADGEN_MODES: tuple[LoadgenMode, ...] = get_args(LoadgenMode)
INFERENCE_BACKENDS: tuple[InferenceBackend, ...] = get_args(InferenceBackend)
TRITON_PROTOCOLS: tuple[TritonProtocol, ...] = get_args(TritonProtocol)
DEVICE_KINDS: tuple[DeviceKind, ...] = get_args(DeviceKind)
INFERENCE_MODELS: tuple[InferenceModel, ...] = get_args(InferenceModel)
INFERENCE_PRECISIONS: tuple[InferencePrecision, ...] = get_args(InferencePrecision)
TRAINING_MODELS: tuple[TrainingModel, ...] = get_args(TrainingModel)
TRAINING_PRECISIONS: tuple[TrainingPrecision, ...] = get_args(TrainingPrecision)
COMM_BACKENDS: tuple[CommBackend, ...] = get_args(CommBackend)
TRAINING_BACKENDS: tuple[TrainingBackend, ...] = get_args(TrainingBackend)
TRAINING_DEVICE_KINDS: tuple[TrainingDeviceKind, ...] = get_args(TrainingDeviceKind)
ALLREDUCE_DTYPES: tuple[AllreduceDtype, ...] = get_args(AllreduceDtype)
TRAINING_DATA_SOURCES: tuple[TrainingDataSource, ...] = get_args(TrainingDataSource)
TRAINING_DATA_CACHE: tuple[TrainingDataCache, ...] = get_args(TrainingDataCache)
ALLREDUCE_DTYPE_BYTES: dict[str, int] = {"float32": 4, "float16": 2, "bfloat16": 2}

ONNX_SUFFIX = ".onnx"
INFERENCE_VARIANTS: dict[str, tuple[str, ...]] = {
    "resnet50": ("full", "tiny"),
    "bert": ("large", "base", "tiny"),
    # tiny runs anywhere; 8b and 70b are llama-sized declarations for the memory arithmetic
    # and a serving endpoint (backend openai)
    "llm": ("tiny", "8b", "70b"),
}
DEFAULT_VARIANT: dict[str, str] = {"resnet50": "full", "bert": "large", "llm": "tiny"}
INPUT_NAMES: dict[str, tuple[str, ...]] = {
    "resnet50": ("input",),
    "bert": ("input_ids", "input_mask", "segment_ids"),
    "llm": ("input_ids",),
}
# MLPerf Inference v6.1 llama3.1-8b: (TTFT p99 ms, TPOT p99 ms) per scenario.
MLPERF_TOKEN_TARGETS_MS: dict[str, tuple[float, float]] = {
    "Server": (2000.0, 100.0), "Interactive": (500.0, 30.0)}
# MLPerf Inference llama2-70b's own (TTFT p99 ms, TPOT p99 ms): a larger model is allowed
# a slower token.
LLAMA2_70B_TOKEN_TARGETS_MS: dict[str, tuple[float, float]] = {
    "Server": (2000.0, 200.0), "Interactive": (450.0, 40.0)}
# The tiny decoder's own targets: a tenth of MLPerf's (it is ~50 000x smaller than 8B).
TINY_TOKEN_TARGETS_MS: dict[str, tuple[float, float]] = {
    "Server": (200.0, 10.0), "Interactive": (50.0, 3.0)}


def mlperf_token_targets(variant: str | None) -> dict[str, tuple[float, float]]:
    """MLPerf's token-latency targets for an llm variant: 70b has its own, every other
    size llama3.1-8b's (the tiny decoder's are TINY_TOKEN_TARGETS_MS, a tenth of 8b's)."""
    return LLAMA2_70B_TOKEN_TARGETS_MS if variant == "70b" else MLPERF_TOKEN_TARGETS_MS


def default_token_targets(variant: str | None, scenario: str) -> tuple[float, float]:
    """(TTFT, TPOT) p99 targets in ms where a workload sets none: the tiny model's own,
    else MLPerf's for its size."""
    table = TINY_TOKEN_TARGETS_MS if variant in (None, "tiny") else mlperf_token_targets(variant)
    return table[scenario]


DEFAULT_TRITON_PORT: dict[str, int] = {"grpc": 8001, "http": 8000}
TRITON_ONLY_OPTIONS = ("url", "protocol", "model_name", "in_flight")
# backend openai (an OpenAI-compatible completions endpoint: vLLM, Triton with TensorRT-LLM,
# or vgpu's own loopback server when url is unset)
OPENAI_OPTIONS = ("url", "model_name", "in_flight")
# backend.provider (onnxruntime on a GPU): CUDA unless TensorRT is asked for.
ORT_GPU_PROVIDERS = ("cuda", "tensorrt")
BOTTLENECK_EXPANSION = 4
DEFAULT_ACCURACY_SAMPLES = 256
ACCURACY_DATASET_KEYS = ("images", "labels")


@dataclass(frozen=True)
class ResNetShape:
    """A training ResNet: bottleneck blocks per stage, stem width and classes."""

    blocks: tuple[int, int, int, int]
    base_width: int
    num_classes: int


TRAINING_SHAPES: dict[str, ResNetShape] = {
    "resnet50": ResNetShape(blocks=(3, 4, 6, 3), base_width=64, num_classes=1000),
    # Small enough that four ranks train a few steps on two CPU cores in seconds.
    "resnet-tiny": ResNetShape(blocks=(1, 1, 1, 1), base_width=8, num_classes=10),
}


def is_builtin_model(name: str) -> bool:
    return name in INFERENCE_MODELS


def _present(data: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in data.items() if value is not None}


@dataclass(frozen=True)
class ModelSpec:
    """A built-in model (name, variant, precision) or an ONNX file (name is its path).
    ``path`` and ``input_names`` are filled in by the harness's reader; a spec that lists
    ``input_names`` asks the reader to check that the model has those inputs."""

    name: str
    variant: str | None = None
    precision: str = "fp32"
    path: str | None = None
    input_names: tuple[str, ...] = ()

    @property
    def builtin(self) -> bool:
        return is_builtin_model(self.name)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name if self.builtin else self.path or self.name}
        if self.builtin:
            data["precision"] = self.precision
            if self.variant is not None:
                data["variant"] = self.variant
        if self.input_names:
            data["input_names"] = list(self.input_names)
        return data


@dataclass(frozen=True)
class BackendSpec:
    name: str = "onnxruntime"
    threads: int | None = None
    url: str | None = None
    protocol: str | None = None
    model_name: str | None = None
    in_flight: int | None = None
    provider: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = _present(asdict(self))
        kept = {"triton": TRITON_ONLY_OPTIONS, "openai": OPENAI_OPTIONS}.get(self.name, ())
        for key in TRITON_ONLY_OPTIONS:
            if key not in kept:
                data.pop(key, None)
        return data


@dataclass(frozen=True)
class DeviceSpec:
    kind: str = "cpu"
    index: int | None = None
    uuid: str | None = None

    def to_json(self) -> dict[str, Any]:
        return _present(asdict(self))


@dataclass(frozen=True)
class LoadgenSpec:
    scenario: str = "Offline"
    mode: str = "PerformanceOnly"
    min_duration_ms: int = 60000
    max_duration_ms: int | None = None
    min_query_count: int = 1
    target_qps: float | None = None
    target_latency_ms: float | None = None
    samples_per_query: int | None = None
    performance_sample_count: int = 256
    # LoadGen's official settings (its built-in mlperf.conf) instead of the ones above;
    # ``mlperf_min_duration_ms`` shortens the rules' min duration (no longer compliant).
    mlperf_rules: bool = False
    mlperf_min_duration_ms: int | None = None

    def to_json(self) -> dict[str, Any]:
        data = _present(asdict(self))
        if not self.mlperf_rules:
            data.pop("mlperf_rules")
        return data


@dataclass(frozen=True)
class AccuracySpec:
    """The accuracy gate: after the performance run, a LoadGen AccuracyOnly pass over
    ``samples`` samples. Without ``dataset`` the labels are an fp32 CPU reference run of
    the same model on the same inputs (cached in ``cache_dir``, default the model cache's
    ``references`` folder); ``dataset`` is an .npz of ``images`` and ``labels``."""

    target: float
    dataset: str | None = None
    samples: int = DEFAULT_ACCURACY_SAMPLES
    cache_dir: str | None = None

    def to_json(self) -> dict[str, Any]:
        return _present(asdict(self))


@dataclass(frozen=True)
class StabilitySpec:
    """Warm-up windows before READY: each lasts ``window_ms``; they go on until the last
    three throughputs agree within ``pct`` percent, or ``max_windows`` have run."""

    pct: float = 5.0
    window_ms: int = 500
    max_windows: int = 6

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class CapacitySpec:
    """Server/Interactive of model llm as capacity at the SLO (loadgen.llm.capacity): a
    search of at most ``runs`` open-loop Poisson runs from ``start_qps``, each
    ``max(min_queries, rate x duration_s)`` queries, bisected to ``resolution`` (a
    fraction), with at most ``concurrency`` queries in flight; ``repeat`` picks the seeded
    arrival pattern (the bench repeat, so that both sides of a block send the same one)."""

    start_qps: float = 50.0
    runs: int = 9
    resolution: float = 0.025
    duration_s: float = 2.0
    min_queries: int = 100
    concurrency: int = CLIENT_CONCURRENCY
    repeat: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class LlmSpec:
    """The token workload of model llm: each sample is a prompt of ``input_tokens_min`` to
    ``input_tokens_max`` token ids (uniform, from the run's seed) answered with
    ``max_output_tokens`` greedy tokens; ``ttft_ms`` / ``tpot_ms`` are LoadGen's
    token-latency targets (Server and Interactive)."""

    max_output_tokens: int = 32
    input_tokens_min: int = 16
    input_tokens_max: int = 64
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    capacity: CapacitySpec | None = None  # Server/Interactive measured as capacity at the SLO

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"max_output_tokens": self.max_output_tokens,
                                "input_tokens": {"min": self.input_tokens_min,
                                                 "max": self.input_tokens_max}}
        return {**data, **_present({
            "ttft_ms": self.ttft_ms, "tpot_ms": self.tpot_ms,
            "capacity": None if self.capacity is None else self.capacity.to_json()})}


@dataclass(frozen=True)
class InferenceRunSpec:
    """``python -m loadgen run SPEC``. ``source`` says where a parsed spec came from; it is
    not part of the document."""

    model: ModelSpec
    backend: BackendSpec = field(default_factory=BackendSpec)
    device: DeviceSpec = field(default_factory=DeviceSpec)
    loadgen: LoadgenSpec = field(default_factory=LoadgenSpec)
    batch_size: int = 1
    seed: int = 0
    warmup_queries: int = 4
    instance_name: str | None = None
    cache_dir: str | None = None
    dataset: str | None = None
    accuracy: AccuracySpec | None = None
    stability: StabilitySpec | None = None
    # share of each batch's time added as busy waiting (0: none): a known slowdown for
    # calibrating verdicts, never part of a real measurement
    slowdown: float = 0.0
    llm: LlmSpec | None = None
    schema_version: int = INFERENCE_SCHEMA_VERSION
    source: str = field(default="<spec>", compare=False)

    def as_dict(self) -> dict[str, Any]:
        """Every field with its value, as the result record echoes it."""
        data = asdict(self)
        data["model"]["input_names"] = list(self.model.input_names)
        return data

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "schema_version": self.schema_version,
            "model": self.model.to_json(),
            "backend": self.backend.to_json(),
            "device": self.device.to_json(),
            "loadgen": self.loadgen.to_json(),
            "batch_size": self.batch_size,
            "seed": self.seed,
            "warmup_queries": self.warmup_queries,
        }
        optional = {"instance_name": self.instance_name, "cache_dir": self.cache_dir,
                    "dataset": self.dataset,
                    "accuracy": self.accuracy.to_json() if self.accuracy else None,
                    "stability": self.stability.to_json() if self.stability else None,
                    "slowdown": self.slowdown or None,
                    "llm": self.llm.to_json() if self.llm else None}
        return {**data, **_present(optional)}


@dataclass(frozen=True)
class TrainingDataSpec:
    """Where a training run's batches come from: ``synthetic`` (random tensors made once
    on the device, no input pipeline) or ``files`` (the JPEG shards of ``vgpu data make``
    in folder ``path`` or at an http(s) URL, decoded by ``workers`` processes per rank)."""

    source: str = "synthetic"
    path: str | None = None
    workers: int = 2
    cache: str = "evict"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TrainRunSpec:
    """``python -m loadgen train SPEC`` on every rank."""

    model: str = "resnet50"
    image_size: int = 224
    batch_size: int = 32
    precision: str = "fp32"
    backend: str = "auto"
    device: str = "cpu"
    warmup_steps: int = 3
    measured_steps: int = 10
    comm_probe_steps: int = 3
    learning_rate: float = 0.01
    threads: int | None = None
    seed: int = 0
    collective_timeout_s: float = 300.0
    instance_name: str = ""
    data: TrainingDataSpec = field(default_factory=TrainingDataSpec)
    schema_version: int = TRAINING_SCHEMA_VERSION

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class AllreduceRunSpec:
    """``python -m loadgen allreduce SPEC`` on every rank."""

    sizes_bytes: tuple[int, ...] = (1 << 10, 1 << 14, 1 << 18, 1 << 20, 1 << 22, 1 << 24,
                                    1 << 26)
    iterations: int = 20
    warmup_iterations: int = 5
    backend: str = "auto"
    device: str = "cpu"
    dtype: str = "float32"
    collective_timeout_s: float = 300.0
    instance_name: str = ""
    schema_version: int = TRAINING_SCHEMA_VERSION

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["sizes_bytes"] = list(self.sizes_bytes)
        return data


# OSU micro-benchmarks' message sizes: 1 B .. 64 MiB, doubling; above OSU's large-message
# threshold (8 KiB) fewer iterations, as osu_latency and osu_allreduce do.
OSU_SIZES: tuple[int, ...] = tuple(1 << power for power in range(27))
OSU_LARGE_MESSAGE_BYTES = 8192
MPI_PROBE_OPS = ("latency", "bandwidth", "allreduce", "allgather", "bcast")


@dataclass(frozen=True)
class MpiProbeRunSpec:
    """``mpirun ... python -m loadgen mpiprobe SPEC``: OSU-style point-to-point latency
    and bandwidth and collective latency by message size, on every rank."""

    sizes_bytes: tuple[int, ...] = OSU_SIZES
    iterations: int = 100
    large_iterations: int = 10
    warmup_iterations: int = 5
    window: int = 64  # osu_bw's messages in flight before the receiver's one reply
    instance_name: str = ""
    schema_version: int = TRAINING_SCHEMA_VERSION

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["sizes_bytes"] = list(self.sizes_bytes)
        return data


# A training dataset of `vgpu data make`: tar shards of JPEG files named
# ``<index>_<class>.jpg`` (dataset_member_name) and a manifest listing every shard.
DATASET_MANIFEST = "manifest.json"
DATASET_FORMAT = "vgpu-jpeg-shards"
DATASET_FORMAT_VERSION = 1
DATASET_CLASSES = 1000
DATASET_SIZES = ("small", "large")


@dataclass(frozen=True)
class DatasetShard:
    file: str  # relative to the dataset's folder
    bytes: int
    images: int
    sha256: str
    copy: int

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "bytes": self.bytes, "images": self.images,
                "sha256": self.sha256, "copy": self.copy}


@dataclass(frozen=True)
class DatasetManifest:
    size: str
    images: int  # in one copy
    copies: int
    seed: int
    images_per_shard: int
    shards: tuple[DatasetShard, ...]
    encoder: str  # the JPEG encoder that made the bytes (the hashes depend on it)

    @property
    def total_bytes(self) -> int:
        return sum(s.bytes for s in self.shards)

    @property
    def total_images(self) -> int:
        return sum(s.images for s in self.shards)

    @property
    def mean_image_bytes(self) -> float:
        return self.total_bytes / self.total_images if self.total_images else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "format": DATASET_FORMAT, "format_version": DATASET_FORMAT_VERSION, "size": self.size,
            "images": self.images, "copies": self.copies, "seed": self.seed,
            "classes": DATASET_CLASSES, "images_per_shard": self.images_per_shard,
            "encoder": self.encoder, "total_bytes": self.total_bytes,
            "total_images": self.total_images,
            "mean_image_bytes": round(self.mean_image_bytes, 1),
            "shards": [s.to_json() for s in self.shards],
        }


def manifest_from_json(data: dict[str, Any]) -> DatasetManifest:
    if data.get("format") != DATASET_FORMAT or \
            data.get("format_version") != DATASET_FORMAT_VERSION:
        raise ValueError(f"not a {DATASET_FORMAT} v{DATASET_FORMAT_VERSION} manifest "
                         f"(format {data.get('format')!r} v{data.get('format_version')!r})")
    shards = tuple(DatasetShard(s["file"], int(s["bytes"]), int(s["images"]), s["sha256"],
                                int(s["copy"])) for s in data["shards"])
    return DatasetManifest(data["size"], int(data["images"]), int(data["copies"]),
                           int(data["seed"]), int(data["images_per_shard"]), shards,
                           str(data["encoder"]))


def dataset_member_name(index: int, label: int) -> str:
    return f"{index:08d}_{label:03d}.jpg"

"""The inference run spec (JSON, schema_version 1): parsed and validated in full before any
work. The types and names are the contract's (loadgen.contract).

Every problem names the field and the fix; all problems are reported together.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

from loadgen.contract import (
    ACCURACY_DATASET_KEYS,
    DEFAULT_ACCURACY_SAMPLES,
    DEFAULT_TRITON_PORT,
    DEFAULT_VARIANT,
    DEVICE_KINDS,
    INFERENCE_BACKENDS,
    INFERENCE_MODELS,
    INFERENCE_PRECISIONS,
    INFERENCE_SCHEMA_VERSION,
    INFERENCE_VARIANTS,
    INPUT_NAMES,
    LLM_MODEL,
    LOADGEN_MODES,
    LOADGEN_SCENARIOS,
    ONNX_SUFFIX,
    ORT_GPU_PROVIDERS,
    TRITON_ONLY_OPTIONS,
    TRITON_PROTOCOLS,
    AccuracySpec,
    BackendSpec,
    CapacitySpec,
    DeviceSpec,
    InferenceRunSpec,
    LlmSpec,
    LlmWorkload,
    LoadgenSpec,
    ModelSpec,
    StabilitySpec,
    is_builtin_model,
    llm_problems,
)
from loadgen.errors import SpecError
from loadgen.specreader import SpecReader, load_json, require_object

Spec = InferenceRunSpec
LABELS_KEY = "labels"
_MODEL_CHOICES = f"{', '.join(INFERENCE_MODELS)} or the path of a {ONNX_SUFFIX} file"
_FALLBACK_MODEL = ModelSpec("resnet50", "full", "fp32", None, INPUT_NAMES["resnet50"])

__all__ = ["AccuracySpec", "BackendSpec", "DeviceSpec", "LoadgenSpec", "ModelSpec", "Spec",
           "SpecError", "load_spec", "parse_spec"]


def _resolve(path_text: str, base: Path) -> Path:
    path = Path(path_text).expanduser()
    return path if path.is_absolute() else base / path


def _read_onnx_model(r: SpecReader, m: dict[str, Any], name: str,
                     base: Path) -> tuple[ModelSpec, bool]:
    """The model and whether its inputs could be read."""
    from loadgen.models import read_model_io

    for key in ("variant", "precision"):
        if key in m:
            r.problem(f"model.{key}", "applies only to the built-in models "
                      f"{' and '.join(INFERENCE_MODELS)}",
                      f"remove model.{key}: the ONNX file fixes it")
    path = _resolve(name, base)
    if not path.is_file():
        r.problem("model.name", f"model file {path} does not exist",
                  "give the path of an existing .onnx file (relative paths start at the "
                  "spec file's folder)")
        return ModelSpec(name, None, "fp32", str(path), ()), False
    try:
        names = read_model_io(path).input_names
    except Exception as exc:
        r.problem("model.name", f"{path} is not a readable ONNX model: {exc}",
                  "export the model to ONNX again")
        return ModelSpec(name, None, "fp32", str(path), ()), False
    return ModelSpec(name, None, "as-exported", str(path), names), True


def _check_input_names(r: SpecReader, m: dict[str, Any], spec: ModelSpec) -> None:
    expected = m.get("input_names")
    if expected is None:
        return
    if not isinstance(expected, list) or not all(isinstance(x, str) for x in expected):
        r.problem("model.input_names", "must be a list of strings",
                  f"set it to {list(spec.input_names)} or remove it")
        return
    for wrong in sorted(set(expected) - set(spec.input_names)):
        r.problem("model.input_names", f"{wrong!r} is not an input of the model "
                  f"(its inputs: {', '.join(spec.input_names)})",
                  f"use the model's input names {list(spec.input_names)}")


def _read_model(r: SpecReader, doc: dict[str, Any], base: Path) -> ModelSpec:
    m = r.section(doc, "model", {"name", "variant", "precision", "input_names"})
    name = m.get("name")
    if not isinstance(name, str) or not name:
        r.problem("model.name", f"is required, got {name!r}", f"set model.name to {_MODEL_CHOICES}")
        return _FALLBACK_MODEL
    if is_builtin_model(name):
        variant = r.choice(m, "variant", "model.variant", INFERENCE_VARIANTS[name],
                           DEFAULT_VARIANT[name])
        precision = r.choice(m, "precision", "model.precision", INFERENCE_PRECISIONS, "fp32")
        spec = ModelSpec(name, variant, precision, None, INPUT_NAMES[name])
    elif name.endswith(ONNX_SUFFIX):
        spec, readable = _read_onnx_model(r, m, name, base)
        if not readable:
            return spec
    else:
        r.problem("model.name", f"unknown model {name!r}", f"set model.name to {_MODEL_CHOICES}")
        return _FALLBACK_MODEL
    _check_input_names(r, m, spec)
    return spec


def _read_backend(r: SpecReader, doc: dict[str, Any], model: ModelSpec) -> BackendSpec:
    b = r.section(doc, "backend", {"name", "threads", "url", "protocol", "model_name",
                                   "in_flight", "provider"})
    name = r.choice(b, "name", "backend.name", INFERENCE_BACKENDS, "onnxruntime")
    threads = r.integer(b, "threads", "backend.threads", None, 1)
    provider = None
    if "provider" in b:
        provider = r.choice(b, "provider", "backend.provider", ORT_GPU_PROVIDERS, "cuda")
        if name != "onnxruntime":
            r.problem("backend.provider", "applies only to backend.name onnxruntime",
                      "remove backend.provider or set backend.name to onnxruntime")
    if name == "openai":
        return _read_openai_backend(r, b, threads)
    if name != "triton":
        for key in TRITON_ONLY_OPTIONS:
            if key in b:
                r.problem(f"backend.{key}", "applies only to backend.name triton or openai",
                          f"remove backend.{key} or set backend.name to triton")
        return BackendSpec(name, threads, provider=provider)
    protocol = r.choice(b, "protocol", "backend.protocol", TRITON_PROTOCOLS, "grpc")
    url = r.text(b, "url", "backend.url") or f"localhost:{DEFAULT_TRITON_PORT[protocol]}"
    host, _, port = url.rpartition(":")
    if "://" in url or not host or not port.isdigit():
        r.problem("backend.url", f"{url!r} is not host:port",
                  f"write it as host:port, e.g. localhost:{DEFAULT_TRITON_PORT[protocol]}")
    default_name = model.name if model.builtin else Path(model.name).stem
    model_name = r.text(b, "model_name", "backend.model_name") or default_name
    in_flight = r.integer(b, "in_flight", "backend.in_flight", 2, 1) or 2
    return BackendSpec(name, threads, url, protocol, model_name, in_flight)


def _read_openai_backend(r: SpecReader, b: dict[str, Any], threads: int | None) -> BackendSpec:
    """An OpenAI-compatible completions endpoint (vLLM, Triton with TensorRT-LLM) as a base
    URL; without one the harness serves the tiny model itself on a loopback port."""
    if "protocol" in b:
        r.problem("backend.protocol", "applies only to backend.name triton",
                  "remove backend.protocol: backend openai speaks HTTP with SSE streaming")
    url = r.text(b, "url", "backend.url")
    if url is not None and not url.startswith(("http://", "https://")):
        r.problem("backend.url", f"{url!r} is not an http(s) base URL",
                  "write it as http://host:port, e.g. http://localhost:8000 (vLLM's default)")
    in_flight = r.integer(b, "in_flight", "backend.in_flight", 1, 1) or 1
    model_name = r.text(b, "model_name", "backend.model_name")
    return BackendSpec("openai", threads, url, None, model_name, in_flight)


_SPEC_FIELDS = {"model": "model.name", "backend": "backend.name", "url": "backend.url",
                "variant": "model.variant", "scenario": "loadgen.scenario",
                "target_qps": "loadgen.target_qps", "accuracy": "accuracy",
                "mlperf_rules": "loadgen.mlperf_rules", "llm": "llm",
                "capacity": "llm.capacity"}


def _check_llm(r: SpecReader, doc: dict[str, Any], model: ModelSpec, backend: BackendSpec,
               loadgen: LoadgenSpec) -> None:
    """The token workload: which backends, variants and scenarios it runs with
    (loadgen.llm.rules, the rules vgpu's scenario files are checked against too)."""
    workload = LlmWorkload(
        model=model.name, backend=backend.name, scenario=loadgen.scenario,
        variant=model.variant, url=bool(backend.url),
        target_qps=loadgen.target_qps is not None,
        accuracy="accuracy" in doc, mlperf_rules=bool(loadgen.mlperf_rules),
        llm_fields=_llm_keys(doc),
        capacity=isinstance(doc.get("llm"), dict) and "capacity" in doc["llm"])
    for found in llm_problems(workload, _SPEC_FIELDS):
        r.problem(found.field, found.message, found.fix)


def _llm_keys(doc: dict[str, Any]) -> list[str]:
    section = doc.get("llm")
    if section is None:
        return []
    return [f"llm.{key}" for key in section] if isinstance(section, dict) and section \
        else ["llm"]


def _read_llm(r: SpecReader, doc: dict[str, Any], model: ModelSpec) -> LlmSpec | None:
    if model.name != LLM_MODEL:
        return None  # an llm section here is one of _check_llm's problems
    section = r.section(doc, "llm", {"max_output_tokens", "input_tokens", "ttft_ms", "tpot_ms",
                                     "capacity"})
    default = LlmSpec()
    tokens = section.get("input_tokens", {"min": default.input_tokens_min,
                                          "max": default.input_tokens_max})
    if not isinstance(tokens, dict):
        r.problem("llm.input_tokens", f"must be an object, got {tokens!r}",
                  "write it as {\"min\": 16, \"max\": 64}")
        tokens = {}
    r.unknown_keys(tokens, {"min", "max"}, "llm.input_tokens.")
    low = r.integer(tokens, "min", "llm.input_tokens.min", default.input_tokens_min, 1)
    high = r.integer(tokens, "max", "llm.input_tokens.max", default.input_tokens_max, 1)
    if low is not None and high is not None and high < low:
        r.problem("llm.input_tokens.max", f"{high} is below min {low}",
                  "make input_tokens.max >= input_tokens.min")
    return LlmSpec(
        max_output_tokens=r.integer(section, "max_output_tokens", "llm.max_output_tokens",
                                    default.max_output_tokens, 1) or default.max_output_tokens,
        input_tokens_min=low or default.input_tokens_min,
        input_tokens_max=high or default.input_tokens_max,
        ttft_ms=r.positive(section, "ttft_ms", "llm.ttft_ms"),
        tpot_ms=r.positive(section, "tpot_ms", "llm.tpot_ms"),
        capacity=_read_capacity(r, section.get("capacity")))


def _read_capacity(r: SpecReader, section: Any) -> CapacitySpec | None:
    if section is None:
        return None
    if not isinstance(section, dict):
        r.problem("llm.capacity", f"must be an object, got {section!r}",
                  'write it as {"start_qps": 50, "runs": 5}')
        return None
    default = CapacitySpec()
    r.unknown_keys(section, set(default.to_json()), "llm.capacity.")
    resolution = r.positive(section, "resolution", "llm.capacity.resolution")
    if resolution is not None and resolution >= 1:
        r.problem("llm.capacity.resolution", f"{resolution} is not a fraction below 1",
                  "give e.g. 0.1 (bisect until the bracket is 10% wide)")
    return CapacitySpec(
        start_qps=r.positive(section, "start_qps", "llm.capacity.start_qps")
        or default.start_qps,
        runs=r.integer(section, "runs", "llm.capacity.runs", default.runs, 3) or default.runs,
        resolution=resolution or default.resolution,
        duration_s=r.positive(section, "duration_s", "llm.capacity.duration_s")
        or default.duration_s,
        min_queries=r.integer(section, "min_queries", "llm.capacity.min_queries",
                              default.min_queries, 1) or default.min_queries,
        concurrency=r.integer(section, "concurrency", "llm.capacity.concurrency",
                              default.concurrency, 1) or default.concurrency,
        repeat=r.integer(section, "repeat", "llm.capacity.repeat", 0, 0) or 0)


def _check_torch(r: SpecReader, model: ModelSpec, device: DeviceSpec) -> None:
    """Backend torch builds the built-in models itself, and runs fp16 only on a GPU."""
    if not model.builtin:
        r.problem("model.name", f"backend torch runs only the built-in models "
                  f"{' and '.join(INFERENCE_MODELS)}, not an ONNX file",
                  "set backend.name to onnxruntime or triton for an ONNX file")
    elif model.precision == "fp16" and device.kind == "cpu":
        r.problem("model.precision", "fp16 on backend torch needs a GPU: PyTorch's CPU "
                  "kernels are not a float16 measurement",
                  "use precision fp32 on device.kind cpu, or device.kind gpu or mig")


def _read_device(r: SpecReader, doc: dict[str, Any]) -> DeviceSpec:
    d = r.section(doc, "device", {"kind", "index", "uuid"})
    kind = r.choice(d, "kind", "device.kind", DEVICE_KINDS, "cpu")
    index = r.integer(d, "index", "device.index", None, 0)
    uuid = r.text(d, "uuid", "device.uuid")
    if kind == "cpu" and (index is not None or uuid is not None):
        r.problem("device", "index and uuid apply only to kind gpu or mig",
                  "remove device.index/device.uuid or set device.kind to gpu or mig")
    if kind == "mig" and not (uuid or "").startswith("MIG-"):
        r.problem("device.uuid", f"kind mig needs the MIG device UUID, got {uuid!r}",
                  "set device.uuid to the MIG-... UUID shown by nvidia-smi -L")
    if kind == "mig" and index is not None:
        r.problem("device.index", "a MIG slice is chosen by uuid, not index",
                  "remove device.index")
    if kind == "gpu" and uuid is not None and not uuid.startswith(("GPU-", "MIG-")):
        r.problem("device.uuid", f"not a GPU or MIG UUID: {uuid!r}",
                  "set device.uuid to a GPU-... or MIG-... UUID shown by nvidia-smi -L")
    if kind == "gpu" and index is not None and uuid is not None:
        r.problem("device", "give either index or uuid, not both", "remove one of them")
    return DeviceSpec(kind, index, uuid)


def _read_loadgen(r: SpecReader, doc: dict[str, Any], has_dataset: bool) -> LoadgenSpec:
    lg = r.section(doc, "loadgen", {
        "scenario", "mode", "min_duration_ms", "max_duration_ms", "min_query_count",
        "target_qps", "target_latency_ms", "samples_per_query", "performance_sample_count",
        "mlperf_rules", "mlperf_min_duration_ms"})
    scenario = r.choice(lg, "scenario", "loadgen.scenario", LOADGEN_SCENARIOS, "Offline")
    mode = r.choice(lg, "mode", "loadgen.mode", LOADGEN_MODES, "PerformanceOnly")
    if mode == "AccuracyOnly" and not has_dataset:
        r.problem("loadgen.mode", "AccuracyOnly needs a dataset with labels",
                  "set dataset to an .npz file with the model's inputs and 'labels', "
                  "or use PerformanceOnly")
    min_duration = r.integer(lg, "min_duration_ms", "loadgen.min_duration_ms", 60000, 1)
    max_duration = r.integer(lg, "max_duration_ms", "loadgen.max_duration_ms", None, 1)
    if max_duration is not None and min_duration is not None and max_duration < min_duration:
        r.problem("loadgen.max_duration_ms", f"{max_duration} is below min_duration_ms",
                  "make max_duration_ms >= min_duration_ms or remove it")
    samples_per_query = r.integer(lg, "samples_per_query", "loadgen.samples_per_query", None, 1)
    if samples_per_query is not None and scenario != "MultiStream":
        r.problem("loadgen.samples_per_query", "applies only to the MultiStream scenario",
                  "remove it or set loadgen.scenario to MultiStream")
    return LoadgenSpec(
        scenario=scenario,
        mode=mode,
        min_duration_ms=min_duration or 60000,
        max_duration_ms=max_duration,
        min_query_count=r.integer(lg, "min_query_count", "loadgen.min_query_count", 1, 1) or 1,
        target_qps=r.positive(lg, "target_qps", "loadgen.target_qps"),
        target_latency_ms=r.positive(lg, "target_latency_ms", "loadgen.target_latency_ms"),
        samples_per_query=samples_per_query,
        performance_sample_count=r.integer(
            lg, "performance_sample_count", "loadgen.performance_sample_count", 256, 1) or 256,
        **_read_mlperf_rules(r, lg),
    )


def _read_mlperf_rules(r: SpecReader, lg: dict[str, Any]) -> dict[str, Any]:
    rules = lg.get("mlperf_rules", False)
    if not isinstance(rules, bool):
        r.problem("loadgen.mlperf_rules", f"must be true or false, got {rules!r}",
                  "set loadgen.mlperf_rules to true or remove it")
        rules = False
    shorter = r.integer(lg, "mlperf_min_duration_ms", "loadgen.mlperf_min_duration_ms", None, 1)
    if shorter is not None and not rules:
        r.problem("loadgen.mlperf_min_duration_ms", "applies only with mlperf_rules",
                  "set loadgen.mlperf_rules to true or remove it (use min_duration_ms)")
    return {"mlperf_rules": rules, "mlperf_min_duration_ms": shorter}


def _read_dataset(r: SpecReader, doc: dict[str, Any], base: Path, model: ModelSpec) -> str | None:
    text = r.text(doc, "dataset", "dataset")
    if text is None:
        return None
    path = _resolve(text, base)
    if not path.is_file() or path.suffix != ".npz":
        r.problem("dataset", f"{path} is not an existing .npz file",
                  "give the path of an .npz with one array per model input and 'labels'")
        return None
    try:
        with zipfile.ZipFile(path) as archive:
            keys = {n.removesuffix(".npy") for n in archive.namelist()}
    except zipfile.BadZipFile as exc:
        r.problem("dataset", f"{path} is not a readable .npz: {exc}", "save it with numpy.savez")
        return None
    for missing in sorted(set(model.input_names) - keys):
        r.problem("dataset", f"{path} has no array named {missing!r} "
                  f"(it has: {', '.join(sorted(keys))})",
                  f"name the arrays after the model inputs {list(model.input_names)}")
    if LABELS_KEY not in keys:
        r.problem("dataset", f"{path} has no 'labels' array", "add labels=... to the .npz")
    return str(path)


def _npz_keys(r: SpecReader, field: str, path: Path) -> set[str] | None:
    if not path.is_file() or path.suffix != ".npz":
        r.problem(field, f"{path} is not an existing .npz file",
                  "give the path of an .npz file (relative paths start at the spec's folder)")
        return None
    try:
        with zipfile.ZipFile(path) as archive:
            return {n.removesuffix(".npy") for n in archive.namelist()}
    except zipfile.BadZipFile as exc:
        r.problem(field, f"{path} is not a readable .npz: {exc}", "save it with numpy.savez")
        return None


def _read_accuracy_dataset(r: SpecReader, a: dict[str, Any], base: Path,
                           model: ModelSpec) -> str | None:
    text = r.text(a, "dataset", "accuracy.dataset")
    if text is None:
        return None
    if model.name == "bert":
        r.problem("accuracy.dataset", "a SQuAD dataset for bert is not supported yet",
                  "remove accuracy.dataset: bert is gated against the fp32 CPU reference")
        return None
    path = _resolve(text, base)
    keys = _npz_keys(r, "accuracy.dataset", path)
    for missing in [k for k in ACCURACY_DATASET_KEYS if keys is not None and k not in keys]:
        r.problem("accuracy.dataset", f"{path} has no array named {missing!r} "
                  f"(it has: {', '.join(sorted(keys or ())) or 'nothing'})",
                  "save it with numpy.savez(path, images=<N,C,H,W float32>, "
                  "labels=<N integers>)")
    return str(path)


def _read_accuracy(r: SpecReader, doc: dict[str, Any], base: Path, model: ModelSpec,
                   mode: str) -> AccuracySpec | None:
    if doc.get("accuracy") is None:
        return None
    a = r.section(doc, "accuracy", {"target", "dataset", "samples", "cache_dir"})
    target = r.positive(a, "target", "accuracy.target")
    if target is None or target > 1:
        r.problem("accuracy.target", f"must be a number in (0, 1], got {a.get('target')!r}",
                  "set accuracy.target, e.g. 0.999")
    if mode == "AccuracyOnly":
        r.problem("accuracy", "applies to PerformanceOnly runs (it adds an accuracy pass)",
                  "remove accuracy, or set loadgen.mode to PerformanceOnly")
    cache_dir = r.text(a, "cache_dir", "accuracy.cache_dir")
    return AccuracySpec(
        target=min(target or 1.0, 1.0),
        dataset=_read_accuracy_dataset(r, a, base, model),
        samples=r.count(a, "samples", "accuracy.samples", DEFAULT_ACCURACY_SAMPLES, 1),
        cache_dir=str(_resolve(cache_dir, base)) if cache_dir else None,
    )


def _read_stability(r: SpecReader, doc: dict[str, Any]) -> StabilitySpec | None:
    if doc.get("stability") is None:
        return None
    s = r.section(doc, "stability", {"pct", "window_ms", "max_windows"})
    default = StabilitySpec()
    return StabilitySpec(
        pct=r.number(s, "pct", "stability.pct", default.pct),
        window_ms=r.count(s, "window_ms", "stability.window_ms", default.window_ms, 1),
        max_windows=r.count(s, "max_windows", "stability.max_windows", default.max_windows, 3),
    )


def _read_slowdown(r: SpecReader, doc: dict[str, Any]) -> float:
    if "slowdown" not in doc:
        return 0.0
    value = r.number(doc, "slowdown", "slowdown", 0.0)
    if value >= 0.9:
        r.problem("slowdown", f"must be below 0.9, got {value!r}",
                  "give the share of throughput to take away, e.g. 0.1 for 10%")
        return 0.0
    return value


def parse_spec(doc: Any, source: str = "<spec>", base: Path | None = None) -> Spec:
    """Validate a decoded JSON document; raise SpecError listing every problem."""
    doc = require_object(doc, source)
    r = SpecReader(source)
    base = base or Path.cwd()
    r.unknown_keys(doc, {"schema_version", "model", "backend", "device", "loadgen",
                         "batch_size", "seed", "warmup_queries", "instance_name", "cache_dir",
                         "dataset", "accuracy", "stability", "slowdown", "llm"})
    r.schema_version(doc, INFERENCE_SCHEMA_VERSION)
    model = _read_model(r, doc, base)
    backend = _read_backend(r, doc, model)
    device = _read_device(r, doc)
    if backend.name == "torch":
        _check_torch(r, model, device)
    if backend.provider is not None and device.kind == "cpu":
        r.problem("backend.provider", "chooses the GPU provider, but device.kind is cpu",
                  "remove backend.provider or set device.kind to gpu or mig")
    dataset = _read_dataset(r, doc, base, model)
    loadgen = _read_loadgen(r, doc, dataset is not None or "dataset" in doc)
    _check_llm(r, doc, model, backend, loadgen)
    cache_dir = r.text(doc, "cache_dir", "cache_dir")
    spec = Spec(
        model=model,
        backend=backend,
        device=device,
        loadgen=loadgen,
        batch_size=r.integer(doc, "batch_size", "batch_size", 1, 1) or 1,
        seed=r.integer(doc, "seed", "seed", 0, 0) or 0,
        warmup_queries=r.integer(doc, "warmup_queries", "warmup_queries", 4, 0) or 0,
        instance_name=r.text(doc, "instance_name", "instance_name"),
        cache_dir=str(_resolve(cache_dir, base)) if cache_dir else None,
        dataset=dataset,
        accuracy=_read_accuracy(r, doc, base, model, loadgen.mode),
        stability=_read_stability(r, doc),
        slowdown=_read_slowdown(r, doc),
        llm=_read_llm(r, doc, model),
        source=source,
    )
    r.check()
    return spec


def load_spec(path: str | Path) -> Spec:
    """Read and validate a spec file. Relative paths inside it start at its folder."""
    path = Path(path)
    return parse_spec(load_json(path), str(path), path.resolve().parent)

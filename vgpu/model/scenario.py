"""Scenario: what to build and what to measure. The VMs (or bare-metal MIG tenants) with
their vGPUs, the VM settings, the guest stack, the workloads, how often to repeat them and
what to judge them against."""

from __future__ import annotations

import re
import string
from typing import Annotated, Literal

from pydantic import (
    Discriminator,
    Field,
    Tag,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from loadgen.contract import (
    CLIENT_CONCURRENCY,
    DEFAULT_ACCURACY_SAMPLES,
    INFERENCE_MODELS,
    INFERENCE_VARIANTS,
    LLM_MODEL,
    ONNX_SUFFIX,
    TRAINING_MODELS,
    CapacitySpec,
    CommBackend,
    InferenceBackend,
    LlmSpec,
    LlmWorkload,
    LoadgenScenario,
    TrainingDataCache,
    TrainingDataSource,
    TrainingModel,
    TrainingPrecision,
    llm_problems,
    runs_to_resolve,
)
from loadgen.contract import InferencePrecision as Precision
from vgpu import mig
from vgpu.container.images import DEFAULT_BASE_IMAGE
from vgpu.container.triton import DEFAULT_TRITON_IMAGE
from vgpu.model.base import UNION_TAGS, FileModel, StrictModel
from vgpu.model.names import Name, NamePattern, expand_pattern

HarnessRuntime = Literal["container", "host"]
_MODELS = ", ".join(INFERENCE_MODELS)
_VARIANTS = "; ".join(f"{model}: {'|'.join(names)}" for model, names in INFERENCE_VARIANTS.items())


class VmSpec(StrictModel):
    """One group of identical VMs (or, on bare metal, harness instances)."""

    name: NamePattern = Field(description="name, or pattern with {n} (1-based) when count > 1")
    count: int = Field(1, ge=1, le=64)
    vcpu: int = Field(32, ge=1, le=768)
    memory_gb: int = Field(64, ge=1, le=24576)
    vgpus: list[str] = Field(
        default_factory=list,
        description="vGPUs of each VM: a MIG profile ('1g.10gb', 'A100D-1-10C', "
                    "'nvidia-1-10c'), a time-sliced type ('A100D-20C') or 'passthrough'",
    )
    host: str | None = Field(None, description="pin these VMs to one inventory host")
    spread: bool = Field(False, description="put each VM of this group on a different host "
                         "(one VM per node, as multinode studies do)")

    def names(self) -> list[str]:
        return expand_pattern(self.name, self.count)


ESXCLI_ADVANCED_SET = re.compile(
    r"^\s*esxcli\s+system\s+settings\s+advanced\s+set\s+"
    r"(?:-o\s+(?P<path1>/\S+)\s+-[is]\s+(?P<value1>\S+)"
    r"|-[is]\s+(?P<value2>\S+)\s+-o\s+(?P<path2>/\S+))\s*$")


def advanced_option_from_esxcli(command: str) -> tuple[str, str] | None:
    """``esxcli system settings advanced set -o /PCI/Foo -i 1`` as the host advanced option
    it sets (``PCI.Foo``, ``1``); None for any other command."""
    match = ESXCLI_ADVANCED_SET.match(command)
    if match is None:
        return None
    path = match.group("path1") or match.group("path2")
    value = match.group("value1") or match.group("value2")
    return path.strip("/").replace("/", "."), value


def _placeholders(command: str) -> set[str]:
    return {field for _, field, _, _ in string.Formatter().parse(command) if field is not None}


class NicFirmwareStep(StrictModel):
    """A firmware setting of the RDMA NICs that ATS needs (NVIDIA AI Enterprise documents
    `mlxconfig -d <device> set ATS_ENABLED=true` and a host reboot, with ACS set on the PCIe
    bridges). It runs on the ESXi host, which vgpu does not log in to, so `vgpu plan` and
    `vgpu preflight` say per host and NIC what to run, and preflight passes once the
    inventory records it done (rdma_nics[].ats_firmware: enabled)."""

    command: str = Field(description="run on the host per NIC; {device} is the NIC's "
                         "rdma_nics[].mlx_device, e.g. `mlxconfig -d {device} set "
                         "ATS_ENABLED=true`")
    reboot: bool = Field(True, description="the host must reboot before the setting holds")
    bridge_command: str | None = Field(
        None, description="sets ACS on one PCIe bridge above the NIC or a GPU of the VM; "
        "{bridge} is the bridge's PCI address as the host lists it (vgpu reads the bridges)")

    @field_validator("command", "bridge_command")
    @classmethod
    def _known_placeholders(cls, value: str | None, info: ValidationInfo) -> str | None:
        allowed = {"command": {"device"}, "bridge_command": {"bridge"}}[str(info.field_name)]
        if value is None:
            return value
        try:
            unknown = _placeholders(value) - allowed
        except ValueError as exc:
            unknown = {str(exc)}
        if not value.strip() or unknown:
            raise PydanticCustomError("vgpu_nic_command", "{message}", {
                "message": f"'{value}' is not a command vgpu can fill in"
                           + (f" (unknown: {', '.join(sorted(unknown))})" if unknown else ""),
                "fix": f"write the command with only {{{next(iter(allowed))}}} as a "
                       "placeholder" + (", e.g. `mlxconfig -d {device} set ATS_ENABLED=true`"
                                        if "device" in allowed else "")})
        return value


class AtsSetting(StrictModel):
    """Address Translation Services as a named setting. No public source names the exact
    keys, so the key/value (VM extraConfig) or the host setting comes from the lab. Host
    settings are ESXi advanced options: `vgpu apply` sets them on every host the plan uses
    (the host's OptionManager) and `vgpu preflight` checks them."""

    name: str
    vm_extra_config: dict[str, str] = Field(default_factory=dict)
    host_options: dict[str, str] = Field(
        default_factory=dict, description="ESXi advanced options set on each host the plan "
        "uses, key as the vSphere API names it (PCI.Foo for esxcli's /PCI/Foo) -> value")
    host_command: str | None = Field(
        None, description="the same as one host option, written as the study's esxcli "
        "command: `esxcli system settings advanced set -o /PCI/Foo -i 1` (-i or -s)")
    nic_firmware: NicFirmwareStep | None = Field(
        None, description="the RDMA NICs' firmware setting (mlxconfig) and ACS on the "
        "bridges, done by an operator on each host the plan gives an RDMA NIC")

    @field_validator("host_command")
    @classmethod
    def _advanced_set_only(cls, value: str | None) -> str | None:
        if value is not None and advanced_option_from_esxcli(value) is None:
            raise PydanticCustomError("vgpu_host_command", "{message}", {
                "message": f"'{value}' is not an esxcli advanced-option command, the only "
                           "host command vgpu can apply (through the vSphere API) and check",
                "fix": "write `esxcli system settings advanced set -o /Group/Name -i VALUE` "
                       "or give host_options: {Group.Name: VALUE}"})
        return value

    def all_host_options(self) -> dict[str, str]:
        """host_options plus the option host_command sets."""
        options = dict(self.host_options)
        parsed = advanced_option_from_esxcli(self.host_command) if self.host_command else None
        if parsed is not None:
            options[parsed[0]] = parsed[1]
        return options


class VmSettings(StrictModel):
    firmware: Literal["efi"] = Field("efi", description="vGPU/passthrough VMs need EFI")
    mmio_size_gb: int | None = Field(None, ge=1, description="64-bit MMIO window; derived "
                                     "from the VM's GPUs when unset")
    p2p: bool = Field(False, description="pciPassthru.allowP2P + RelaxACSforP2P; does "
                      "nothing for MIG-backed vGPUs (they have no P2P or NVLink): `vgpu "
                      "plan` and `vgpu apply` warn")
    ats: list[AtsSetting] = Field(default_factory=list)
    memory_reservation: Literal["full"] = Field(
        "full", description="vGPU VMs must reserve all guest memory")
    enable_uvm: bool = Field(False, description="pciPassthru<N>.cfg.enable_uvm = 1")
    extra_config: dict[str, str] = Field(default_factory=dict,
                                         description="further VM advanced settings")

    def host_options(self) -> dict[str, str]:
        """ESXi advanced options every ATS setting asks of the hosts."""
        options: dict[str, str] = {}
        for ats in self.ats:
            options.update(ats.all_host_options())
        return options


class GuestStack(StrictModel):
    driver: Literal["vgpu-guest", "datacenter", "none"] = Field(
        "vgpu-guest", description="NVIDIA guest driver kind; the file comes from the inventory")
    container_runtime: Literal["docker", "apptainer", "none"] = "docker"
    images: list[str] = Field(default_factory=list)
    base_packages: list[str] = Field(default_factory=lambda: ["build-essential", "cmake",
                                                              "curl"])
    licensing: bool = Field(True, description="configure and check nvidia-gridd")
    feature_type: Literal[1, 2, 4] | None = Field(
        None, description="gridd FeatureType, numbered as in the driver's gridd.conf template: "
        "1 NVIDIA vGPU (the licence edition follows the vGPU type), 2 RTX Virtual "
        "Workstation, 4 Virtual Compute Server (passthrough GPUs); unset: 1 on VMs with a "
        "vGPU, 4 on VMs whose GPUs are passed through")
    passwordless_ssh: bool = Field(False, description="SSH between the scenario's VMs "
                                                      "(multinode training)")
    runtime: HarnessRuntime | None = Field(
        None, description="where the harness runs on the guests: `container` (each instance "
        "in its own container of the harness image, made by the harness-image step) or "
        "`host` (a venv, made by the node-harness step); unset: container where "
        "container_runtime is docker, else host (the harness image is a Docker image)")
    base_image: str | None = Field(
        None, description="image the harness image is built FROM on each guest (runtime "
        "container); unset: the NGC PyTorch release for the inventory's guest driver branch "
        "(R535 -> CUDA 12.2, R550 -> 12.4, R570 -> 12.8; another branch is refused), "
        f"or {DEFAULT_BASE_IMAGE} where the guest driver version is not known")
    harness_image: str | None = Field(
        None, description="registry image of the harness that the guests pull (and tag "
        "`vgpu-harness:<harness version>`) instead of building it; its label "
        "vgpu.harness.version must be this vgpu's harness version")
    triton_image: str = Field(
        DEFAULT_TRITON_IMAGE, description="tritonserver image `vgpu bench` runs on each "
        "guest (one container per guest) for workloads with backend triton, unless "
        "--triton-url names an existing server")

    @field_validator("runtime")
    @classmethod
    def _runtime_has_engine(cls, value: HarnessRuntime | None,
                            info: ValidationInfo) -> HarnessRuntime | None:
        if value == "container" and info.data.get("container_runtime") == "none":
            raise PydanticCustomError("vgpu_runtime", "{message}", {
                "message": "runtime 'container' needs a container runtime, but "
                           "container_runtime is 'none'",
                "fix": "set container_runtime: docker, or runtime: host"})
        return value

    @property
    def effective_runtime(self) -> HarnessRuntime:
        """``runtime`` as given, else container where Docker is the container runtime
        (the harness image is built and run with Docker; an Apptainer guest runs the
        harness venv unless asked otherwise)."""
        if self.runtime is not None:
            return self.runtime
        return "container" if self.container_runtime == "docker" else "host"


class InputTokens(StrictModel):
    """Prompt lengths of the token workload: uniform between min and max, seeded."""

    min: int = Field(16, ge=1, le=131072)
    max: int = Field(64, ge=1, le=131072)

    @model_validator(mode="after")
    def _ordered(self) -> InputTokens:
        if self.max < self.min:
            raise ValueError(f"input_tokens.max {self.max} is below input_tokens.min {self.min}")
        return self


class CapacitySettings(StrictModel):
    """Model llm, Server/Interactive: the capacity search each repeat runs per instance
    (loadgen.llm.capacity): at most ``runs`` open-loop runs from ``start_qps``, each
    ``max(min_queries, rate x duration_s)`` seeded Poisson queries, bisected until the
    bracket is ``resolution`` wide."""

    start_qps: float = Field(50.0, gt=0, description="the first rate tried (queries/s); "
                             "the search doubles or halves from it")
    runs: int = Field(9, ge=3, le=30, description="runs per search, the confirming rerun "
                      "included (at least enough to bisect a doubling bracket to the "
                      "resolution: 8 for 0.025)")
    resolution: float = Field(0.025, gt=0, lt=1, description="bisect until the bracket is "
                              "this fraction wide; the brackets widen the capacity ratio's "
                              "interval, so keep it well below tolerances.capacity_pct")
    duration_s: float = Field(2.0, gt=0, le=3600, description="seconds of arrivals per run "
                              "(at least min_queries queries)")
    min_queries: int = Field(100, ge=1, le=1_000_000, description="fewest queries a run "
                             "sends (its p99 rests on them)")
    concurrency: int = Field(CLIENT_CONCURRENCY, ge=1, le=4096, description="most queries "
                             "the client has in flight; one waiting for a place waits on the "
                             "run's clock, so the wait counts as latency")

    @model_validator(mode="after")
    def _runs_reach_resolution(self) -> CapacitySettings:
        needed = runs_to_resolve(self.resolution)
        if self.runs < needed:
            raise ValueError(
                f"runs {self.runs} cannot bisect a doubling bracket to resolution "
                f"{self.resolution:g} (it needs {needed}: two to bracket, the bisections, "
                f"the rerun), so the capacity would be known only within a wider bracket; "
                f"set runs to {needed} or more, or a coarser resolution")
        return self

    def spec(self, repeat: int) -> CapacitySpec:
        return CapacitySpec(start_qps=self.start_qps, runs=self.runs,
                            resolution=self.resolution, duration_s=self.duration_s,
                            min_queries=self.min_queries, concurrency=self.concurrency,
                            repeat=repeat)


# model llm's fields, and each role of loadgen.llm.rules by its name in a workload
_LLM_ONLY_FIELDS = ("max_output_tokens", "input_tokens", "ttft_ms", "tpot_ms", "url",
                    "capacity")
_SCENARIO_FIELDS = {"model": "model", "backend": "backend", "url": "url",
                    "variant": "variant", "scenario": "scenario", "target_qps": "target_qps",
                    "accuracy": "accuracy_target", "mlperf_rules": "--mlperf-rules",
                    "llm": ", ".join(_LLM_ONLY_FIELDS), "capacity": "capacity"}


class InferenceWorkload(StrictModel):
    kind: Literal["inference"] = "inference"
    name: Name | None = None
    model: str = Field(description=f"{_MODELS}, or a path to an {ONNX_SUFFIX} file")
    variant: str | None = Field(None, description=_VARIANTS)
    backend: InferenceBackend = "onnxruntime"
    scenario: LoadgenScenario = "Offline"
    batch: int = Field(1, ge=1, le=4096)
    precision: Precision = "fp32"
    target_qps: float | None = Field(None, gt=0)
    target_latency_ms: float | None = Field(None, gt=0)
    duration_s: float = Field(600, gt=0, description="LoadGen min_duration on a GPU when "
                              "set here; unset, a GPU's run lasts what the probe's rate "
                              "stability needs (10-120 s) and 600 s under --mlperf-rules")
    cpu_duration_s: float = Field(3, gt=0, description="min_duration used when only a CPU "
                                  "is there (a CPU run is a functional check, not a figure)")
    accuracy_target: float | None = Field(
        None, gt=0, le=1, description="e.g. 0.999: every instance also runs a LoadGen "
        "accuracy pass and the workload FAILs below it (docs/results.md, accuracy gate)")
    accuracy_dataset: str | None = Field(
        None, description="path on every target of an .npz with `images` (N,C,H,W float32) "
        "and `labels` (N integers) for the accuracy pass (resnet50 or a one-input ONNX "
        "model); unset: labels are the fp32 CPU reference run of the same model")
    accuracy_samples: int = Field(DEFAULT_ACCURACY_SAMPLES, ge=1, le=100000,
                                  description="samples in the accuracy pass")
    min_valid: int | None = Field(
        None, ge=1, le=100, description="fewest repeats LoadGen must find VALID for a PASS "
        "(default: all of the scenario's repeats); fewer make the verdict INCONCLUSIVE")
    stability_pct: float | None = Field(
        None, gt=0, le=100, description="before the timed run each instance runs warm-up "
        "windows until its last three agree within this many percent (default 5 on a GPU, "
        "15 on a CPU, whose shared cores are noisier)")
    url: str | None = Field(
        None, description="backend openai: base URL of an OpenAI-compatible completions "
        "endpoint (vLLM, Triton with TensorRT-LLM), e.g. http://localhost:8000; unset: each "
        "harness serves the tiny model itself on a loopback port")
    max_output_tokens: int | None = Field(
        None, ge=1, le=131072, description="model llm: tokens generated per prompt "
        "(default 32); with input_tokens.max and batch it sizes the KV cache")
    input_tokens: InputTokens | None = Field(
        None, description="model llm: prompt lengths {min, max} (default 16..64), seeded")
    ttft_ms: float | None = Field(
        None, gt=0, description="model llm, Server/Interactive: LoadGen's p99 time-to-first-"
        "token target (default: MLPerf's 2000 / 500 ms for 8b, 2000 / 450 ms for 70b, a "
        "tenth of 8b's for tiny); a capacity search's runs last at least ten of it")
    tpot_ms: float | None = Field(
        None, gt=0, description="model llm, Server/Interactive: LoadGen's p99 time-per-"
        "output-token target (default: MLPerf's 100 / 30 ms for 8b, 200 / 40 ms for 70b, "
        "a tenth of 8b's for tiny)")
    capacity: CapacitySettings | None = Field(
        None, description="model llm, Server/Interactive: measure capacity at the SLO (the "
        "highest Poisson rate whose p99 TTFT and TPOT meet the targets) instead of LoadGen "
        "at target_qps; the verdict is the capacity ratio VM/bare metal")

    @field_validator("model")
    @classmethod
    def _model(cls, value: str) -> str:
        if value in INFERENCE_MODELS or value.endswith(ONNX_SUFFIX):
            return value
        raise ValueError(f"'{value}' is not a model; valid: {_MODELS}, or a path "
                         f"ending in {ONNX_SUFFIX}")

    @model_validator(mode="after")
    def _consistent(self) -> InferenceWorkload:
        allowed = INFERENCE_VARIANTS.get(self.model)
        if self.variant is not None and allowed is not None and self.variant not in allowed:
            raise ValueError(f"variant '{self.variant}' is not one of {self.model}'s: "
                             f"{', '.join(sorted(allowed))}")
        if self.scenario in ("Server", "Interactive") and self.target_qps is None and \
                self.capacity is None:
            raise ValueError(f"a {self.scenario} workload needs target_qps")
        self._token_fields_consistent()
        if self.accuracy_dataset is not None and self.accuracy_target is None:
            raise ValueError("accuracy_dataset needs accuracy_target (e.g. 0.999)")
        if self.accuracy_dataset is not None and self.model == "bert":
            raise ValueError("accuracy_dataset is not supported for bert yet (no SQuAD "
                             "reader): remove it to gate against the fp32 CPU reference")
        if self.accuracy_dataset is not None and not self.accuracy_dataset.endswith(".npz"):
            raise ValueError(f"accuracy_dataset '{self.accuracy_dataset}' must be an .npz "
                             "file with arrays `images` and `labels`")
        return self

    def _token_fields_consistent(self) -> None:
        """loadgen.llm.rules, the rules the harness checks its run specs against too."""
        given = [name for name in _LLM_ONLY_FIELDS if getattr(self, name) is not None]
        workload = LlmWorkload(
            model=self.model, backend=self.backend, scenario=self.scenario,
            variant=self.variant, url=self.url is not None,
            target_qps=self.target_qps is not None,
            accuracy=self.accuracy_target is not None,
            llm_fields=given if self.model != LLM_MODEL else [],
            capacity=self.capacity is not None)
        found = llm_problems(workload, _SCENARIO_FIELDS)
        if found:
            raise PydanticCustomError("vgpu_llm_rules", "{message}", {
                "message": "; ".join(p.message for p in found),
                "fix": "; ".join(p.fix for p in found)})

    @property
    def label(self) -> str:
        return self.name or f"{self.model}-{self.scenario.lower()}"

    def llm_spec(self, repeat: int = 0) -> LlmSpec | None:
        """The harness's llm section (a capacity search's arrival pattern that of
        ``repeat``); None for the other models."""
        if self.model != LLM_MODEL:
            return None
        default = LlmSpec()
        tokens = self.input_tokens or InputTokens()
        return LlmSpec(max_output_tokens=self.max_output_tokens or default.max_output_tokens,
                       input_tokens_min=tokens.min, input_tokens_max=tokens.max,
                       ttft_ms=self.ttft_ms, tpot_ms=self.tpot_ms,
                       capacity=None if self.capacity is None else self.capacity.spec(repeat))


class TrainingNetwork(StrictModel):
    interface: str | None = Field(None, description="NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME")
    rdma: bool | None = Field(None, description="GPUDirect RDMA on (NCCL_IB_DISABLE=0) or off")
    port_mapping: bool | None = Field(None, description="the study's ibdev2netdev mapping")
    env: dict[str, str] = Field(default_factory=dict)
    master_port: int = Field(29500, ge=1024, le=65535)


class TrainingData(StrictModel):
    """Where the ranks' batches come from (lab study D): synthetic tensors, or JPEG shards
    read from the nodes' storage and decoded on CPU workers."""

    source: TrainingDataSource = Field("synthetic", description="synthetic (no input "
                                       "pipeline) or files (the shards of `vgpu data make`)")
    path: str | None = Field(None, description="the dataset's folder on every node (a local "
                             "disk, the VM's datastore-backed disk, an NFS mount) or an "
                             "http(s) URL; on this machine without one: a dataset made in "
                             "vgpu's cache")
    size: Literal["small", "large"] = Field("small", description="small (about 110 KB a "
                                            "JPEG) or large (about 1.3 MB)")
    images: int = Field(2000, ge=1, description="images in one copy of the dataset vgpu "
                        "makes on this machine")
    copies: int = Field(1, ge=1, le=10000, description="copies of the set (the study's "
                        "150 kept it out of the page cache)")
    workers: int = Field(4, ge=1, le=256, description="decode worker processes per rank")
    cache: TrainingDataCache = Field("evict", description="page cache before the run: evict "
                                     "the dataset's files, drop the node's (root), or warm")


class TrainingWorkload(StrictModel):
    kind: Literal["training"] = "training"
    name: Name | None = None
    model: TrainingModel = "resnet50"
    nodes: int = Field(1, ge=1, le=1024)
    gpus_per_node: int = Field(1, ge=1, le=16)
    batch_per_gpu: int = Field(256, ge=1)
    precision: TrainingPrecision = "fp32"
    comm_backend: CommBackend = "nccl"
    warmup_steps: int = Field(10, ge=0)
    steps: int = Field(100, ge=1)
    cpu_steps: int = Field(5, ge=1, description="measured steps when only a CPU is there")
    image_size: int = Field(224, ge=8)
    network: TrainingNetwork = Field(default_factory=TrainingNetwork)
    data: TrainingData = Field(default_factory=TrainingData)
    ranks_per_node: int | None = Field(None, ge=1, le=256, description="comm_backend mpi: "
                                       "ranks on each node (default gpus_per_node)")
    threads_per_rank: int | None = Field(None, ge=1, le=1024, description="comm_backend "
                                         "mpi: each rank's OMP_NUM_THREADS (default: the "
                                         "node's cores / its ranks); threads x ranks above "
                                         "the cores is warned of")

    @model_validator(mode="after")
    def _mpi_settings(self) -> TrainingWorkload:
        if self.comm_backend == "mpi":
            if self.data.source == "files":
                raise PydanticCustomError("vgpu_mpi_data", "{message}", {
                    "message": "comm_backend mpi trains on synthetic data only",
                    "fix": "use data.source: synthetic, or comm_backend: gloo for files"})
            return self
        if self.ranks_per_node is not None or self.threads_per_rank is not None:
            raise PydanticCustomError("vgpu_mpi_only", "{message}", {
                "message": "ranks_per_node and threads_per_rank are settings of "
                           f"comm_backend mpi, not {self.comm_backend}",
                "fix": "set comm_backend: mpi, or remove them"})
        return self

    @field_validator("model", mode="before")
    @classmethod
    def _model(cls, value: object) -> object:
        if isinstance(value, str) and value not in TRAINING_MODELS:
            # e.g. bert: an inference model only; the node harness has no trainer for it.
            raise PydanticCustomError("vgpu_training_model", "{message}", {
                "message": f"no trainer for model '{value}'; training models: "
                           f"{', '.join(TRAINING_MODELS)}",
                "fix": f"use model: {TRAINING_MODELS[0]}, or make it an inference workload "
                       "(kind: inference)"})
        return value

    @property
    def label(self) -> str:
        return self.name or f"train-{self.model}-{self.nodes}n"


def _workload_kind(value: object) -> str:
    if isinstance(value, dict):
        return str(value.get("kind", "inference"))
    return str(getattr(value, "kind", "inference"))


UNION_TAGS.update({"inference": InferenceWorkload, "training": TrainingWorkload})

Workload = Annotated[
    Annotated[InferenceWorkload, Tag("inference")] | Annotated[TrainingWorkload, Tag("training")],
    Discriminator(_workload_kind),
]


RdmaKind = Literal["none", "roce", "ib"]
RDMA_KINDS: tuple[str, ...] = ("none", "roce", "ib")


class ScenarioNetwork(StrictModel):
    """The network between the scenario's nodes, a dimension of the study (100 GbE vs
    25 GbE, RDMA on or off): recorded with every training run and allreduce probe."""

    speed_gbps: float = Field(gt=0, le=3200, description="link speed of each node's "
                              "interface in Gbit/s (e.g. 100, 25; 0.1 for 100 Mbit/s)")
    rdma: RdmaKind = Field("none", description="RDMA between the nodes: none (TCP sockets), "
                           "roce (RDMA over Converged Ethernet) or ib (InfiniBand)")
    interface: str | None = Field(
        None, description="the nodes' interface on that network (NCCL_SOCKET_IFNAME / "
        "GLOO_SOCKET_IFNAME); a workload's network.interface overrides it")

    @field_validator("speed_gbps", mode="before")
    @classmethod
    def _speed_number(cls, value: object) -> object:
        if isinstance(value, str):
            raise PydanticCustomError("vgpu_speed", "{message}", {
                "message": f"speed_gbps must be a number of Gbit/s, got '{value}'",
                "fix": "write e.g. speed_gbps: 100 (100 GbE) or speed_gbps: 25"})
        return value


def _check_workload_rdma(network: ScenarioNetwork | None, workloads: list[Workload]) -> None:
    """A workload that asks for GPUDirect RDMA needs an RDMA network in the scenario."""
    if network is None or network.rdma != "none":
        return
    for index, workload in enumerate(workloads):
        if isinstance(workload, TrainingWorkload) and workload.network.rdma:
            raise PydanticCustomError("vgpu_rdma", "{message}", {
                "message": f"workloads[{index}].network.rdma is true but the scenario's "
                           "network.rdma is 'none'",
                "fix": "set network.rdma to roce or ib, or workload network.rdma: false"})


class Baseline(StrictModel):
    scenario: str | None = Field(None, description="scenario id to compare against "
                                 "(e.g. its bare-metal counterpart)")
    reference_run: str | None = Field(None, description="name given with `vgpu baseline set`")

    @model_validator(mode="after")
    def _one(self) -> Baseline:
        if bool(self.scenario) == bool(self.reference_run):
            raise ValueError("give exactly one of 'scenario' or 'reference_run'")
        return self


class Tolerances(StrictModel):
    throughput_pct: float = Field(2.0, ge=0, le=100,
                                  description="allowed throughput loss vs the baseline "
                                  "(samples/s, and output tokens/s of model llm)")
    latency_pct: float = Field(5.0, ge=0, le=1000,
                               description="allowed latency increase vs the baseline")
    ttft_pct: float = Field(10.0, ge=0, le=1000, description="model llm: allowed increase "
                            "of time to first token (p50 and p99) vs the baseline")
    tpot_pct: float = Field(5.0, ge=0, le=1000, description="model llm: allowed increase "
                            "of time per output token (inter-token latency, p50 and p99)")
    capacity_pct: float | None = Field(None, gt=0, le=100, description="model llm measured "
                                       "as capacity at the SLO: allowed capacity loss vs the "
                                       "baseline (default: throughput_pct); the searches' "
                                       "resolution widens the interval, not this margin")


class MigPartedRef(StrictModel):
    """A bare-metal layout given as an NVIDIA mig-parted config instead of ``vms``: one
    harness instance per MIG device (or whole GPU where mig-enabled is false)."""

    file: str = Field(description="mig-parted config file (version v1), relative to the "
                      "scenario file")
    config: str = Field(description="name of the config under mig-configs")
    gpus: int = Field(1, ge=1, le=16, description="how many GPUs `devices: all` stands for")


class Scenario(FileModel):
    id: Name = Field(description="short id used with --scenario")
    name: str = Field(description="human-readable name")
    description: str = ""
    study: str | None = Field(None, description="the lab study this reproduces")
    platform: Literal["vsphere", "bare-metal"] = Field(
        "vsphere", description="VMs on vSphere, or MIG instances on a bare-metal host")
    gpu: str = Field(description=f"GPU model: {', '.join(mig.gpu_model_names())}")
    vms: list[VmSpec] = Field(min_length=1, description="VM groups (bare metal: instances; "
                              "filled from mig_parted when that is given instead)")
    mig_parted: MigPartedRef | None = Field(
        None, description="bare metal: take the instances from a mig-parted config instead "
        "of listing vms")
    vm_settings: VmSettings = Field(default_factory=VmSettings,
                                    description="VM advanced settings apply sets")
    guest: GuestStack = Field(default_factory=GuestStack,
                              description="what provisioning installs in each guest")
    workloads: list[Workload] = Field(min_length=1, description="inference (kind inference, "
                                      "the default) and training workloads")
    repeats: int = Field(3, ge=1, le=100, description="runs per workload; results are the "
                         "mean with a 95% confidence interval")
    baseline: Baseline | None = Field(None, description="what results are judged against")
    tolerances: Tolerances = Field(default_factory=Tolerances,
                                   description="allowed differences from the baseline")
    network: ScenarioNetwork | None = Field(
        None, description="the network between the nodes (link speed, RDMA, interface): a "
        "dimension recorded with training runs and allreduce probes")

    @model_validator(mode="after")
    def _network_consistent(self) -> Scenario:
        _check_workload_rdma(self.network, self.workloads)
        return self

    @field_validator("id", mode="before")
    @classmethod
    def _id_text(cls, value: object) -> object:
        return str(value) if isinstance(value, int) else value

    @field_validator("gpu")
    @classmethod
    def _gpu(cls, value: str) -> str:
        return mig.canonical_gpu_key(value)

    @property
    def gpu_model(self) -> mig.GpuModel:
        return mig.gpu_model(self.gpu)

    def vm_names(self) -> list[str]:
        return [n for spec in self.vms for n in spec.names()]

"""Plain data records the store reads and writes. Kept free of SQL so that compare,
report and other parts (training) can build and read them directly."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from loadgen.contract import RunResult, parse_run_result

TargetKind = Literal["local", "vm", "bare-metal"]
RunStatus = Literal["running", "ok", "failed", "aborted"]
TARGET_KINDS: tuple[str, ...] = ("local", "vm", "bare-metal")
RUN_STATUSES: tuple[str, ...] = ("running", "ok", "failed", "aborted")
LATENCY_PERCENTILES: tuple[str, ...] = ("p50", "p90", "p95", "p97", "p99", "p99_9")
CPU_DEVICE_NOTE = "CPU, no MIG slice"


@dataclass(frozen=True)
class Platform:
    """What a result was measured on. Every field is optional: a local CPU run knows its
    host name and harness version, a VM run also the ESXi build and the vGPU profile."""

    host: str | None = None
    esxi_version: str | None = None
    esxi_build: str | None = None
    host_driver: str | None = None
    guest_driver: str | None = None
    gpu: str | None = None
    vgpu_profile: str | None = None
    mig_profile: str | None = None
    attachment: str | None = None  # passthrough | vgpu | none
    vcpus: int | None = None
    memory_gb: float | None = None
    harness_version: str | None = None
    runtime: str | None = None  # container | host
    container_image: str | None = None  # the harness image's tag
    container_image_id: str | None = None  # sha256:... of that image
    ort_package: str | None = None  # onnxruntime-gpu | onnxruntime
    ort_version: str | None = None
    execution_provider: str | None = None  # what ONNX Runtime ran on (CUDA, TensorRT, CPU)
    cuda_version: str | None = None  # the CUDA the inference runtime was built against
    cuda_driver_version: str | None = None  # the CUDA version the guest driver supports
    cudnn_version: str | None = None
    tensorrt_version: str | None = None
    vm_hardware_version: str | None = None  # vmx-NN
    firmware: str | None = None  # efi | bios
    link_speed_gbps: float | None = None  # the scenario's network between nodes
    rdma: str | None = None  # none | roce | ib
    network_interface: str | None = None
    storage_kind: str | None = None  # where a file-fed run read its dataset (nfs, local disk)
    storage_mount: str | None = None  # "<device> on <mount point> type <fstype>"
    simulator: str | None = None  # what of the platform was simulated (vgpu sim's lab)

    def differences(self, other: Platform) -> dict[str, tuple[str | None, str | None]]:
        """Field -> (this, other) for every field the two records disagree on; per-image
        ids are left out (they differ between any two machines). ``host`` is compared: a
        run on another ESXi host than its baseline is not the same measurement."""
        out: dict[str, tuple[str | None, str | None]] = {}
        for name in PLATFORM_COMPARED:
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine != theirs:
                out[name] = (_shown(mine), _shown(theirs))
        return out


# What a lab engineer compares between two runs, in reading order. ``host`` is the ESXi
# host of a VM run and the machine of a bare-metal or local one.
PLATFORM_COMPARED = (
    "host", "esxi_version", "esxi_build", "host_driver", "guest_driver", "cuda_driver_version",
    "cuda_version", "cudnn_version", "tensorrt_version", "ort_package", "ort_version",
    "execution_provider", "runtime", "container_image", "gpu", "vgpu_profile",
    "mig_profile", "attachment", "vm_hardware_version", "firmware", "vcpus", "memory_gb",
    "link_speed_gbps", "rdma", "network_interface", "storage_kind", "storage_mount",
    "harness_version", "simulator",
)


def _shown(value: object) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True)
class WorkloadIdentity:
    """What a stored workload is, read from its stored detail, never from its key: the
    scenario file's workload name and what ran (model, variant, precision, LoadGen
    scenario, batch, backend). A training or probe run stores its name as its key and
    none of the rest (None)."""

    name: str
    model: str | None = None
    variant: str | None = None
    precision: str | None = None
    scenario: str | None = None
    batch: int | None = None
    backend: str | None = None

    @classmethod
    def of(cls, workload: str, detail: Mapping[str, Any]) -> WorkloadIdentity:
        """Every inference run has stored its identity in ``workload_detail`` since the
        store began (label, model, variant, precision, loadgen_scenario, batch, backend);
        a run without a label is one whose key is its name."""
        def text(key: str) -> str | None:
            value = detail.get(key)
            return None if value is None else str(value)

        batch = detail.get("batch")
        return cls(name=text("label") or workload, model=text("model"),
                   variant=text("variant"), precision=text("precision"),
                   scenario=text("loadgen_scenario"),
                   batch=batch if isinstance(batch, int) else None, backend=text("backend"))


@dataclass(frozen=True)
class RunStart:
    """What is known when a run (one repeat of one workload) begins."""

    series_id: str
    scenario_id: str
    scenario_name: str
    workload: str
    target_kind: TargetKind
    repeat_index: int = 0
    kind: str = "inference"
    scenario_file: str | None = None
    scenario_revision: str | None = None
    workload_detail: dict[str, Any] = field(default_factory=dict)
    platform: Platform | None = None


@dataclass(frozen=True)
class InstanceResult:
    """One harness instance's result in one run."""

    name: str
    status: str  # ok | failed
    device_kind: str | None = None
    device_name: str | None = None
    device_note: str | None = None
    mig_profile: str | None = None
    mig_uuid: str | None = None
    validity: str | None = None
    validity_reasons: list[str] = field(default_factory=list)
    throughput: float | None = None
    latency_ns: dict[str, float] = field(default_factory=dict)
    timed_start_unix: float | None = None
    timed_end_unix: float | None = None
    log_dir: str | None = None
    result: dict[str, Any] = field(default_factory=dict)  # result.json, as the harness wrote it
    platform: Platform | None = None

    @cached_property
    def run_result(self) -> RunResult:
        """``result`` parsed, once: a record stored by any earlier version reads here.
        Only an inference run's instances hold the harness's record (a training run's
        hold its ranks' own): read this for those."""
        return parse_run_result(self.result or {})


@dataclass(frozen=True)
class Metric:
    """A named value of a run, optionally of one instance. Training and any other
    producer store their numbers as metrics (e.g. ``throughput`` samples/s, ``workers``)."""

    name: str
    value: float
    unit: str = ""
    instance: str | None = None


@dataclass(frozen=True)
class Run:
    """A stored run as read back."""

    id: int
    series_id: str
    scenario_id: str
    scenario_name: str
    scenario_file: str | None
    scenario_revision: str | None
    workload: str
    workload_detail: dict[str, Any]
    kind: str
    target_kind: str
    status: str
    reason: str | None
    started_at: float
    ended_at: float | None
    repeat_index: int
    sync_skew_s: float | None
    host: str | None
    pid: int | None
    platform: Platform | None

    @property
    def identity(self) -> WorkloadIdentity:
        return WorkloadIdentity.of(self.workload, self.workload_detail)


@dataclass(frozen=True)
class StoredInstance:
    """An instance row as read back."""

    id: int
    run_id: int
    result: InstanceResult


@dataclass(frozen=True)
class Baseline:
    name: str
    run_id: int
    series_id: str
    created_at: float


@dataclass(frozen=True)
class SeriesReference:
    """Which series judges ``series_id`` and how, as stored when it ran: ``relation`` is
    ``interleaved-twin`` (its bare-metal or baseline scenario ran block by block with it),
    ``twin`` (the newest stored series of its baseline scenario) or ``named-baseline``
    (`vgpu baseline set`); ``kind`` the comparison; ``tolerance`` the default band and
    ``tolerances`` the per-metric ones (fractions); ``note`` says which, in words;
    ``family`` is shared by the series one command judged together (one Holm family)."""

    series_id: str
    reference_series: str
    relation: str
    kind: str
    tolerance: float
    tolerances: dict[str, float]
    note: str
    family: str | None = None


@dataclass(frozen=True)
class BaselineSet:
    """What a named baseline set (`vgpu revalidate --capture-baseline`) was measured on:
    the ESXi host, when it was pinned with --host, and the host facts (a saved preflight's
    id) drift is measured against: those of the capture, then those `vgpu drain` saved
    just before the upgrade."""

    name: str  # e.g. "pre-upgrade", or "pre-upgrade@DC0_C0_H1" for one host's
    host: str | None
    hardware_uuid: str | None
    facts_id: str | None
    created_at: float
    drain_facts_id: str | None = None

    @property
    def pre_upgrade_facts_id(self) -> str | None:
        """What drift is measured against: the drain's facts, else the capture's."""
        return self.drain_facts_id or self.facts_id

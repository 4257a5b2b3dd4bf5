"""What a series ran on, field by field, and what differs between two series: the
platform record summed up across a series' instances and runs."""

from __future__ import annotations

from vgpu.results.store.records import PLATFORM_COMPARED, Platform
from vgpu.results.store.series import SeriesData
from vgpu.results.verdict.compare import PlatformChange


def series_platforms(series: SeriesData) -> list[Platform]:
    """Every platform record of the series: the instances', else the runs'."""
    found = [inst.result.platform for stored in series.instances.values()
             for inst in stored if inst.result.platform is not None]
    return found or [run.platform for run in series.runs if run.platform is not None]


def series_platform(series: SeriesData) -> dict[str, str | None]:
    """Field -> its value across the series ("a, b" when instances differ, None when no
    record has it)."""
    records = series_platforms(series)
    out: dict[str, str | None] = {}
    for name in PLATFORM_COMPARED:
        values = sorted({str(v) for p in records if (v := getattr(p, name)) is not None})
        out[name] = ", ".join(values) if values else None
    return out


def platform_changes(candidate: SeriesData, reference: SeriesData) -> list[PlatformChange]:
    """The fields whose values differ between the two series, in reading order; a field
    neither side recorded is not a change."""
    mine, theirs = series_platform(candidate), series_platform(reference)
    return [PlatformChange(name, mine[name], theirs[name]) for name in PLATFORM_COMPARED
            if mine[name] != theirs[name]]


FIELD_LABELS = {
    "host": "host", "esxi_version": "ESXi version", "esxi_build": "ESXi build",
    "host_driver": "host driver (VIB)", "guest_driver": "guest driver",
    "cuda_driver_version": "CUDA (driver)", "cuda_version": "CUDA (runtime build)",
    "cudnn_version": "cuDNN", "tensorrt_version": "TensorRT",
    "ort_package": "ONNX Runtime package", "ort_version": "ONNX Runtime",
    "execution_provider": "execution provider", "runtime": "runtime",
    "container_image": "container image", "gpu": "GPU", "vgpu_profile": "vGPU type",
    "mig_profile": "MIG profile", "attachment": "attachment",
    "vm_hardware_version": "VM hardware version", "firmware": "firmware",
    "vcpus": "vCPUs", "memory_gb": "memory GB", "link_speed_gbps": "link speed Gbit/s",
    "rdma": "RDMA", "network_interface": "network interface", "storage_kind": "storage",
    "storage_mount": "storage mount", "harness_version": "harness", "simulator": "simulated",
}


def describe_changes(changes: list[PlatformChange]) -> list[str]:
    """One line per change, reference first: "ESXi build: 22380479 -> 24022510"."""
    return [f"{FIELD_LABELS.get(c.field, c.field)}: {c.reference or '-'} -> "
            f"{c.candidate or '-'}" for c in changes]

"""`vgpu mig status --json` and `vgpu mig verify-catalogue` through the CLI against the
real driver: GPUs listed, MIG mode read, the catalogue compared, nothing changed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.gpu import figures
from tests.gpu.compare import run_module
from tests.gpu.gpuhost import GPU_INDEX, GpuHost, catalogue_outcome

pytestmark = pytest.mark.gpu


def mig_status(host: GpuHost) -> dict[str, Any]:
    done = run_module(host, "vgpu", "mig", "status", "--json", timeout=120)
    assert done.returncode == 0, done.stderr
    status: dict[str, Any] = json.loads(done.stdout)
    return status


def mig_picture(status: dict[str, Any]) -> list[Any]:
    """What a read-only command must leave as it was."""
    return [(g["gpu"]["uuid"], g["mig_mode"], g["instances"], g["mig_devices"])
            for g in status["gpus"]]


def test_status_lists_the_gpus_and_reads_mig_mode(gpu_host: GpuHost) -> None:
    status = mig_status(gpu_host)
    assert status["simulated"] is False
    assert status["driver"]["driver_version"] == gpu_host.driver_version
    first = status["gpus"][GPU_INDEX]
    assert first["gpu"]["uuid"] == gpu_host.uuid
    assert first["gpu"]["name"]
    if gpu_host.mig_current is None:
        assert first["mig_mode"] is None and first["note"].startswith("no MIG")
    else:
        assert first["mig_mode"] == {"current": gpu_host.mig_current,
                                     "pending": gpu_host.mig_pending}
    figures.note("mig_status", {
        "gpus": [{"name": g["gpu"]["name"], "model_key": g["gpu"]["model_key"],
                  "mig_mode": g["mig_mode"], "mig_devices": len(g["mig_devices"]),
                  "note": g["note"]} for g in status["gpus"]],
        "driver": status["driver"]})


def test_verify_catalogue_is_read_only(gpu_host: GpuHost) -> None:
    before = mig_status(gpu_host)
    done = run_module(gpu_host, "vgpu", "mig", "verify-catalogue", "--gpu", str(GPU_INDEX),
                      "--json", timeout=120)
    after = mig_status(gpu_host)
    assert mig_picture(after) == mig_picture(before)
    outcome, detail = catalogue_outcome(done.returncode, done.stdout, done.stderr)
    if outcome != "report":
        figures.note("verify_catalogue", {"exit": done.returncode, outcome: detail})
        if outcome == "skip":
            pytest.skip(detail)
        pytest.fail(detail)
    report = detail
    differences = report["differences"]
    assert (done.returncode == 1) == bool(differences)
    for difference in differences:
        assert set(difference) == {"profile", "field", "catalogue", "nvml"}
    figures.note("verify_catalogue", {"exit": done.returncode, "model": report["model"],
                                      "differences": differences, "notes": report["notes"]})

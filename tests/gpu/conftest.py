"""GPU acceptance suite (marker ``gpu``): runs where an NVIDIA GPU is present and skips
elsewhere with a reason starting 'gpu:' (a failure under VGPU_REQUIRE_GPU=1, see
tests/conftest.py). Read-only on the GPU: it never changes MIG mode or resets anything.

The session binds CUDA_VISIBLE_DEVICES to GPU 0 (or its first MIG device) before anything
creates a CUDA context; the harness and raw-loop processes it starts inherit that."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.gpu import figures
from tests.gpu.compare import json_line, run_module
from tests.gpu.gpuhost import GpuHost, NoGpu, probe


@pytest.fixture(scope="session")
def gpu_host() -> Iterator[GpuHost]:
    try:
        host = probe()
    except NoGpu as exc:
        figures.note("gpu", {"error": str(exc)})
        pytest.skip(str(exc))
    figures.note("gpu", host.as_dict())
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CUDA_VISIBLE_DEVICES", host.cuda_visible_devices)
        yield host


@pytest.fixture(scope="session")
def torch_cuda(gpu_host: GpuHost) -> dict[str, Any]:
    """torch's view of the bound device, asked in a process of its own."""
    done = run_module(gpu_host, "tests.gpu.rawloop", "probe", timeout=120)
    if done.returncode != 0:
        pytest.skip(f"gpu: torch does not import here: {done.stderr.strip()[-500:]}")
    facts = json_line(done)
    if not facts["cuda_available"]:
        pytest.skip(f"gpu: torch {facts['torch']} sees no CUDA device (CUDA build "
                    f"{facts['cuda']}) with CUDA_VISIBLE_DEVICES={gpu_host.cuda_visible_devices}")
    figures.note("torch", facts)
    return facts


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    path = figures.write(int(exitstatus))
    if path is not None:
        print(f"\nGPU figures written to {path}")

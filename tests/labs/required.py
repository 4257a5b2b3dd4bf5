"""Suite-wide rule: under CI (or VGPU_REQUIRE_LABS=1) a test lab that is missing is a
failure, not a skip. The labs (vSphere simulator, sshd, Docker, Triton, torch, Chromium)
are installed by scripts/setup.sh, so a skip there means the set-up is broken. Only skips
about the GPU (reason starting with 'gpu:') stay skips: CI has no GPU. With
VGPU_REQUIRE_GPU=1 those fail too, for the GPU acceptance run, except the optional ones
('gpu: optional:', e.g. onnxruntime-gpu not installed on the GPU host). A peer's tool that
no package registry carries and vgpu does not install (reason starting with 'external:',
e.g. the MLCommons submission checker) stays a skip: the test runs where it is given."""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest

GPU_SKIP_PREFIX = "gpu:"
GPU_OPTIONAL_PREFIX = "gpu: optional:"
EXTERNAL_PREFIX = "external:"


def _labs_required() -> bool:
    flag = os.environ.get("VGPU_REQUIRE_LABS")
    if flag is not None:
        return flag == "1"
    return os.environ.get("CI", "").lower() in ("true", "1")


def _skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _allowed(reason: str) -> bool:
    if reason.startswith((GPU_OPTIONAL_PREFIX, EXTERNAL_PREFIX)):
        return True
    if reason.startswith(GPU_SKIP_PREFIX):
        return os.environ.get("VGPU_REQUIRE_GPU") != "1"
    return not _labs_required()


def _fail_missing_lab(report: pytest.TestReport | pytest.CollectReport) -> None:
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = _skip_reason(report)
    if _allowed(reason):
        return
    report.outcome = "failed"
    if reason.startswith(GPU_SKIP_PREFIX):
        report.longrepr = (f"required GPU missing (VGPU_REQUIRE_GPU=1): {reason}\n"
                           "fix: run on a host with an NVIDIA GPU and a CUDA build of torch "
                           "(docs/gpu-check.md)")
        return
    report.longrepr = (f"required test lab missing (CI or VGPU_REQUIRE_LABS=1): {reason}\n"
                       "fix: run `bash scripts/setup.sh --test` as root (it installs and "
                       "builds every lab)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, pytest.TestReport, None]:
    outcome = yield
    _fail_missing_lab(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector
                               ) -> Generator[None, pytest.CollectReport, None]:
    outcome = yield
    _fail_missing_lab(outcome.get_result())

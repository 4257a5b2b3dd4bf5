"""The record names the TensorRT beside onnxruntime-gpu under each of its PyPI names,
CUDA 13's included (an installed distribution's metadata, read by importlib.metadata)."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadgen.versions import _onnxruntime_build


def _install_metadata(folder: Path, name: str, version: str) -> None:
    info = folder / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


@pytest.mark.parametrize("name", ["tensorrt-cu13", "tensorrt-cu13-libs", "tensorrt-cu12"])
def test_tensorrt_version_is_found_under_each_name(tmp_path: Path, name: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    assert _onnxruntime_build()["tensorrt_version"] is None
    _install_metadata(tmp_path, name, "10.13.3.9")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _onnxruntime_build()["tensorrt_version"] == "10.13.3.9"

"""The JSON MIG program shipped to a bare-metal host and run through the provisioning
Transport (here LocalTransport: real subprocesses in a scratch home), against a simulated
GPU whose state lives in a file."""

from __future__ import annotations

import ast
import ctypes.util
import json
import sys
import zipfile
from io import BytesIO
from pathlib import Path

import pytest

from vgpu import catalog
from vgpu.errors import InputError
from vgpu.nvml.errors import LayoutError
from vgpu.nvml.remote import RemoteMig, apply_plan_on_host, bundle
from vgpu.nvml.simulator import SimulatedGpuBackend
from vgpu.planner import build_plan
from vgpu.remote.local import LocalTransport

from .conftest import layout_of

pytestmark = pytest.mark.skipif(ctypes.util.find_library("nvidia-ml") is not None,
                                reason="gpu: a real NVIDIA driver is present")


@pytest.fixture
def remote(tmp_path: Path) -> RemoteMig:
    home = tmp_path / "home"
    home.mkdir()
    env = {"VGPU_GPU_SIMULATOR": "A100-80GB",
           "VGPU_GPU_SIMULATOR_STATE": str(tmp_path / "simgpu.json"),
           "VGPU_STATE_DIR": str(tmp_path / "state")}
    return RemoteMig(LocalTransport("bm-host", home=home), python=sys.executable, sudo=False,
                     env=env)


def test_bundle_is_reproducible_and_leaves_the_planner_behind() -> None:
    data = bundle()
    assert data == bundle()
    names = zipfile.ZipFile(BytesIO(data)).namelist()
    assert "__main__.py" in names and "vgpu/nvml/layout.py" in names
    assert {"vgpu/mig/catalogue.py", "vgpu/mig/solver.py"} <= set(names)
    assert "vgpu/nvml/from_plan.py" not in names and not any("model" in n for n in names)
    assert "vgpu/mig/migparted.py" not in names  # needs PyYAML, which a host may lack


def test_bundle_holds_every_vgpu_module_its_modules_import() -> None:
    """The helper runs on a host where vgpu is not installed: each vgpu module that a
    bundled module imports (at the top or inside a function) is in the bundle."""
    with zipfile.ZipFile(BytesIO(bundle())) as zf:
        names = set(zf.namelist())
        sources = {n: zf.read(n).decode() for n in names if n.endswith(".py")}
    missing = set()
    for name, source in sources.items():
        for node in ast.walk(ast.parse(source, name)):
            if isinstance(node, ast.ImportFrom) and node.module and \
                    node.module.startswith("vgpu"):
                path = node.module.replace(".", "/")
                if f"{path}.py" not in names and f"{path}/__init__.py" not in names:
                    missing.add(f"{name} -> {node.module}")
    assert not missing


def test_bm6_layout_on_a_host_through_the_transport(tmp_path: Path, remote: RemoteMig) -> None:
    SimulatedGpuBackend(["A100-80GB"], state_file=tmp_path / "simgpu.json", mig_enabled=True)

    applied = remote.apply(layout_of("bm6"))

    assert applied["simulated"] is True
    assert [(c["profile"], c["start"]) for c in applied["created"]] == [
        ("4g.40gb", 0), ("2g.20gb", 4), ("1g.10gb", 6)]
    assert (tmp_path / "home" / remote.path).exists()
    devices = remote.mig_devices()
    assert sorted(d["uuid"] for d in devices) == sorted(c["uuid"] for c in applied["created"])
    destroyed = remote.destroy(0)
    assert len([a for a in destroyed["actions"] if a.startswith("destroyed")]) == 3
    assert json.loads((tmp_path / "simgpu.json").read_text())["gpus"][0]["instances"] == []


def test_remote_errors_keep_their_kind(tmp_path: Path, remote: RemoteMig) -> None:
    SimulatedGpuBackend(["A100-80GB"], state_file=tmp_path / "simgpu.json")
    with pytest.raises(InputError, match="MIG mode is disabled on GPU 0") as disabled:
        remote.apply(layout_of("bm8"))
    assert "fix: rerun with --enable-mig when the GPU is free" in str(disabled.value)
    with pytest.raises(LayoutError, match="bm-host: MIG mode on GPU 0 is now disabled"):
        remote.apply(layout_of("bm8"), enable_mig=True)


def test_apply_plan_on_host_creates_that_hosts_layout(tmp_path: Path, remote: RemoteMig) -> None:
    SimulatedGpuBackend(["A100-80GB"], state_file=tmp_path / "simgpu.json", mig_enabled=True)
    plan = build_plan(catalog.load("bm7"))

    [result] = apply_plan_on_host(remote.transport, plan, plan.hosts[0], python=sys.executable,
                                  sudo=False, env=remote.env)

    assert sorted((c["profile"], c["start"], c["owner"]) for c in result["created"]) == [
        ("1g.10gb", 6, "bm7-1g"), ("2g.20gb", 0, "bm7-2g-1"), ("2g.20gb", 2, "bm7-2g-2"),
        ("2g.20gb", 4, "bm7-2g-3")]

"""The command line stays light: `vgpu --help`, a command's help, a shell-completion call
(the shell runs vgpu on every TAB) and the refusal of a broken scenario file load none of
the heavy subsystems; each command imports what it runs when it runs. Checked by what a
fresh process has in sys.modules afterwards, never by timing
(benchmarks/cli_startup.py measures the CPU time)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BROKEN = ROOT / "tests" / "model" / "broken"
# What a light call must never load: vSphere, SSH, the numeric and ONNX stacks, NVML,
# PostgreSQL, PyTorch.
HEAVY = ("pyVmomi", "paramiko", "numpy", "onnx", "onnxruntime", "pynvml", "psycopg", "torch")
# Help and completion read no file: they build no model of vgpu's and open no store (pydantic
# itself is typer's: it coerces parameter values with it).
NOT_FOR_HELP = (*HEAVY, "yaml", "vgpu.model", "vgpu.results", "vgpu.bench",
                "vgpu.provision", "vgpu.vsphere.commands", "vgpu.revalidate.flow",
                "vgpu.train", "vgpu.nvml")
# Refusing a scenario file needs its models, nothing that would act on it.
NOT_FOR_A_REFUSAL = ("pyVmomi", "paramiko", "onnxruntime", "pynvml", "psycopg", "torch")

# Runs `vgpu ARGS` in this fresh interpreter as the console script does, then reports its
# exit code and the loaded modules (on a file: stdout is the command's own).
_PROBE = """
import json, sys
args, report = json.loads(sys.argv[1]), sys.argv[2]
sys.argv = ["vgpu", *args]
from vgpu.cli import main
code = 0
try:
    main()
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else 1
with open(report, "w") as out:
    json.dump({"code": code, "modules": sorted(sys.modules)}, out)
"""


def _run(args: list[str], tmp_path: Path, env: dict[str, str] | None = None,
         ) -> tuple[int, set[str], str]:
    report = tmp_path / "report.json"
    run = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(args), str(report)],
        capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    assert report.exists(), run.stderr
    got = json.loads(report.read_text())
    return got["code"], set(got["modules"]), run.stdout + run.stderr


def _loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(n for n in names if n in modules
                  or any(m.startswith(n + ".") for m in modules))


@pytest.mark.parametrize("args", [
    ["--help"], ["bench", "--help"], ["compare", "--help"], ["results", "--help"],
    ["baseline", "set", "--help"], ["sim", "up", "--help"], ["apply", "--help"],
    ["mig", "apply", "--help"], ["train", "run", "--help"], ["revalidate", "--help"],
], ids=" ".join)
def test_help_loads_no_heavy_module(args: list[str], tmp_path: Path) -> None:
    code, modules, output = _run(args, tmp_path)
    assert code == 0, output
    assert "Usage:" in output
    assert _loaded(modules, NOT_FOR_HELP) == []


def test_shell_completion_loads_no_heavy_module(tmp_path: Path) -> None:
    code, modules, output = _run([], tmp_path, env={
        "_VGPU_COMPLETE": "complete_bash", "COMP_WORDS": "vgpu be", "COMP_CWORD": "1"})
    assert code == 0, output
    assert output.split() == ["bench"]
    assert _loaded(modules, NOT_FOR_HELP) == []


def test_refusing_a_broken_scenario_loads_only_its_models(tmp_path: Path) -> None:
    path = BROKEN / "bad_profile.yaml"
    code, modules, output = _run(["plan", str(path)], tmp_path)
    assert code == 2, output
    assert f"{path}:9 vms[1].vgpus[0]: '5g.50gb' is not a MIG profile" in output
    assert "vgpu.model.scenario" in modules  # the file was read and validated
    assert _loaded(modules, NOT_FOR_A_REFUSAL) == []


def test_refusing_a_bench_of_a_broken_scenario_loads_only_its_models(tmp_path: Path) -> None:
    code, modules, output = _run(["bench", str(BROKEN / "bad_profile.yaml")], tmp_path)
    assert code == 2, output
    assert _loaded(modules, NOT_FOR_A_REFUSAL) == []

"""The locks scripts/setup.sh installs from agree with what they lock: every requirement of
pyproject.toml (and of the harness image's inputs) pinned there, at a version its range
allows, with hashes; so a range edited without `bash scripts/lock.sh` is caught here."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).parents[2]
LOCKS = REPO / "scripts" / "locks"
HARNESS = REPO / "vgpu" / "container" / "harness_image"
_PIN = re.compile(r"^([A-Za-z0-9_.\-\[\],]+)==([^\s;\\]+)(?:\s*;\s*([^\\]+?))?\s*\\?$")


def _pins(lock: Path, python: str = "3.11") -> dict[str, Version]:
    """Name -> pinned version for this Python (a universal lock pins per marker)."""
    env = {**default_environment(), "python_version": python, "python_full_version": python}
    pins: dict[str, Version] = {}
    lines = lock.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines):
        found = _PIN.match(line)
        if not found:
            continue
        name, version, marker = found.groups()
        assert lines[number + 1].strip().startswith("--hash=sha256:"), \
            f"{lock.name}: {name} has no hash"
        if marker and not Requirement(f"x ; {marker}").marker.evaluate(env):  # type: ignore[union-attr]
            continue
        pins[canonicalize_name(name.split("[")[0])] = Version(version)
    return pins


def _project() -> dict[str, object]:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _assert_locked(requirements: list[str], lock: Path) -> None:
    pins = _pins(lock)
    for text in requirements:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is not in {lock.name}: run `bash scripts/lock.sh`"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"{lock.name} pins {req.name}=={pins[name]}, outside '{req.specifier}' of "
            "pyproject.toml: run `bash scripts/lock.sh`")


def test_vgpu_lock_pins_every_dependency_inside_its_range() -> None:
    _assert_locked(list(_project()["dependencies"]), LOCKS / "vgpu.txt")  # type: ignore[arg-type]


def test_test_lock_pins_the_dev_and_mpi_extras_and_what_torch_requires() -> None:
    project = _project()
    extras = project["optional-dependencies"]
    torch_deps = [line for line in (LOCKS / "torch-deps.in").read_text().splitlines()
                  if line and not line.startswith("#")]
    _assert_locked([*project["dependencies"], *extras["dev"], *extras["mpi"],  # type: ignore[index]
                    *torch_deps], LOCKS / "test.txt")
    assert "torch" not in _pins(LOCKS / "test.txt"), "torch is installed by its pinned version"


@pytest.mark.parametrize("lock,inputs", [
    (LOCKS / "triton.txt", LOCKS / "triton.in"),
    (HARNESS / "harness-requirements.txt", HARNESS / "harness-requirements.in"),
])
def test_side_locks_pin_their_inputs(lock: Path, inputs: Path) -> None:
    wanted = [line for line in inputs.read_text().splitlines()
              if line and not line.startswith("#") and "onnxruntime-gpu" not in line]
    _assert_locked(wanted, lock)


def test_major_releases_that_would_break_vgpu_are_excluded() -> None:
    """`pip install vgpu` users get no surprise major release of these."""
    ranges = {canonicalize_name(Requirement(t).name): Requirement(t).specifier
              for t in _project()["dependencies"]}  # type: ignore[attr-defined]
    for name, next_major in [("pydantic", "3"), ("typer", "1"), ("numpy", "3"),
                             ("onnx", "2"), ("pyyaml", "7")]:
        assert not ranges[name].contains(next_major), f"{name} admits {next_major}"

"""Guest step names are defined once (vgpu.stepnames): the planner writes them, and
``@guest_step`` registers exactly one step class under each."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from vgpu import stepnames
from vgpu.model.load import load_scenario
from vgpu.planner import guest_steps
from vgpu.provision.requirements import GuestRequirements
from vgpu.provision.step import REGISTRY, Check, HostContext, Step, guest_step
from vgpu.provision.steps import build_steps
from vgpu.provision.steps.system import PackagesStep

ROOT = Path(__file__).resolve().parents[2]


def test_every_name_has_exactly_one_registered_class() -> None:
    assert sorted(REGISTRY) == sorted(stepnames.ALL)
    assert len(set(stepnames.ALL)) == len(stepnames.ALL)
    assert all(cls.name == name for name, cls in REGISTRY.items())


def test_every_container_runtime_of_a_scenario_has_its_step() -> None:
    assert set(stepnames.CONTAINER_RUNTIMES.values()) <= set(REGISTRY)


def test_every_planned_step_builds_with_its_settings() -> None:
    requirements = GuestRequirements(steps=stepnames.ALL, base_packages=("curl",),
                                     docker_package="docker-ce", apptainer_package="apptainer")
    steps = build_steps(requirements)
    assert [s.name for s in steps] == list(stepnames.ALL)
    packages = {s.name: s.packages for s in steps if isinstance(s, PackagesStep)}
    assert packages == {stepnames.BASE_PACKAGES: ("curl",), stepnames.DOCKER: ("docker-ce",),
                        stepnames.APPTAINER: ("apptainer",),
                        stepnames.MPI_RUNTIME: ("openmpi-bin", "libopenmpi-dev")}


@pytest.mark.parametrize("path", sorted((ROOT / "scenarios").glob("*.yaml")), ids=lambda p: p.stem)
def test_catalogue_plans_name_only_registered_steps(path: Path) -> None:
    steps = guest_steps(load_scenario(path))
    assert steps[0] == stepnames.OS_FACTS
    assert [s for s in steps if s not in REGISTRY] == []


class _Unnamed(Step):
    name = "install-everything"

    def check(self, ctx: HostContext) -> Check:
        return Check(True, "")


class _SecondProbe(Step):
    name = stepnames.GPU_PROBE

    def check(self, ctx: HostContext) -> Check:
        return Check(True, "")


def test_registering_an_unknown_or_taken_name_fails() -> None:
    with pytest.raises(ValueError, match=r"not in vgpu\.stepnames"):
        guest_step(_Unnamed)
    with pytest.raises(ValueError, match="registered twice"):
        guest_step(_SecondProbe)
    assert REGISTRY[stepnames.GPU_PROBE] is not _SecondProbe


def test_planning_imports_neither_provisioning_nor_paramiko() -> None:
    code = ("import sys, vgpu.planner; print(sorted(m for m in sys.modules if m == 'paramiko' "
            "or m.startswith('vgpu.provision')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"

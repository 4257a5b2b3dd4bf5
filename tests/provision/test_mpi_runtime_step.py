"""The mpi-runtime guest step on this machine (Open MPI from Debian, mpi4py in a harness
venv): planned only for scenarios that train over MPI, done where both answer, and named
as missing where the harness venv cannot import mpi4py."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import yaml

from vgpu import stepnames
from vgpu.model.load import load_scenario
from vgpu.planner import guest_steps
from vgpu.provision.facts import OsFacts
from vgpu.provision.requirements import GuestRequirements
from vgpu.provision.step import HostContext, HostTarget
from vgpu.provision.steps.harness import harness_paths
from vgpu.provision.steps.mpi import MpiRuntimeStep
from vgpu.remote.local import LocalTransport

ROOT = Path(__file__).resolve().parents[2]


def test_only_mpi_scenarios_plan_the_step_after_the_harness(tmp_path: Path) -> None:
    steps = guest_steps(load_scenario(ROOT / "scenarios" / "train_mpi_2.yaml"))
    assert steps.index(stepnames.MPI_RUNTIME) == steps.index(stepnames.NODE_HARNESS) + 1
    data = yaml.safe_load((ROOT / "scenarios" / "train_mpi_2.yaml").read_text())
    data["workloads"][0].update(comm_backend="gloo", ranks_per_node=None,
                                threads_per_rank=None)
    (tmp_path / "gloo.yaml").write_text(yaml.safe_dump(data))
    assert stepnames.MPI_RUNTIME not in guest_steps(load_scenario(tmp_path / "gloo.yaml"))


def _context(home: Path) -> HostContext:
    facts = OsFacts(distro="debian", version="12", kernel="", cpus=2, memory_kib=1,
                    package_manager="apt-get", home=str(home), system_root="/", arch="amd64")
    return HostContext(HostTarget("local", "local", "me"), LocalTransport("local", home=home),
                       GuestRequirements(steps=(stepnames.MPI_RUNTIME,)), os=facts)


@pytest.mark.mpi
@pytest.mark.skipif(shutil.which("mpirun") is None or shutil.which("dpkg") is None,
                    reason="Open MPI (mpirun) from Debian is missing")
def test_check_proves_mpirun_and_mpi4py_in_the_harness_venv(tmp_path: Path) -> None:
    pytest.importorskip("mpi4py", reason="the mpi extra (mpi4py) is not installed")
    step = MpiRuntimeStep.for_guest(GuestRequirements(steps=()))
    assert isinstance(step, MpiRuntimeStep)
    without = step.check(_context(tmp_path))
    assert not without.done and "cannot import mpi4py" in without.detail
    python = Path(harness_paths(str(tmp_path))["python"])
    python.parent.mkdir(parents=True)
    # this venv stands for the guest's harness venv
    python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    done = step.check(_context(tmp_path))
    assert done.done, done.detail
    assert "Open MPI" in done.detail and "mpirun" in done.detail

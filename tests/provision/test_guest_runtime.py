"""guest.runtime: where the harness runs on the guests decides the plan's harness step
(harness-image for containers, node-harness for the host venv) and the GPU probe."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from vgpu.container.images import DEFAULT_BASE_IMAGE, harness_base
from vgpu.model.inventory import Inventory
from vgpu.model.load import load_scenario
from vgpu.model.scenario import GuestStack, Scenario
from vgpu.planner import guest_steps

ROOT = Path(__file__).resolve().parents[2]


def scenario(**guest: object) -> Scenario:
    return Scenario.model_validate({
        "id": "t", "name": "t", "gpu": "A100-80GB", "vms": [{"name": "vm", "vgpus": ["1g.10gb"]}],
        "workloads": [{"model": "resnet50"}], "guest": guest})


@pytest.mark.parametrize(("engine", "runtime", "effective"), [
    ("docker", None, "container"), ("apptainer", None, "host"), ("none", None, "host"),
    ("docker", "host", "host"), ("docker", "container", "container"), ("none", "host", "host"),
])
def test_effective_runtime(engine: str, runtime: str | None, effective: str) -> None:
    assert GuestStack(container_runtime=engine, runtime=runtime).effective_runtime == effective


def test_container_runtime_needs_a_container_engine() -> None:
    with pytest.raises(ValidationError, match="needs a container runtime"):
        GuestStack(container_runtime="none", runtime="container")


def test_image_defaults() -> None:
    guest = GuestStack()
    # unset: chosen from the guest driver's branch, else the default
    # (tests/container/test_harness_base.py)
    assert (guest.base_image, guest.harness_image) == (None, None)
    assert harness_base(guest.base_image, None).image == DEFAULT_BASE_IMAGE


def test_container_scenarios_get_the_harness_image_and_gpu_probe() -> None:
    steps = guest_steps(scenario())
    assert steps == ["os-facts", "base-packages", "container-runtime:docker", "nvidia-driver",
                     "nvidia-container-toolkit", "vgpu-licensing", "harness-image",
                     "verify-gpu", "gpu-probe"]
    assert steps.index("harness-image") > steps.index("container-runtime:docker")


def test_host_scenarios_keep_the_harness_venv() -> None:
    for guest in ({"runtime": "host"}, {"container_runtime": "none"}):
        steps = guest_steps(scenario(**guest))
        assert "node-harness" in steps
        assert "harness-image" not in steps and "gpu-probe" not in steps


def test_no_driver_no_gpu_probe() -> None:
    steps = guest_steps(scenario(driver="none"))
    assert "harness-image" in steps and "gpu-probe" not in steps


def test_catalogue_scenarios_run_in_containers() -> None:
    """Except those that train over MPI: mpirun starts the harness venv on every node."""
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        loaded = load_scenario(path)
        mpi = any(getattr(w, "comm_backend", None) == "mpi" for w in loaded.workloads)
        assert loaded.guest.effective_runtime == ("host" if mpi else "container"), path.name
        assert ("node-harness" if mpi else "harness-image") in guest_steps(loaded), path.name


def test_inventory_docker_cli() -> None:
    assert Inventory(name="i").docker_cli().argv("ps") == ["docker", "ps"]
    inventory = Inventory(name="i", docker={"host": "unix:///run/d.sock", "binary": "/bin/dk"})
    assert inventory.docker_cli().argv("ps") == ["/bin/dk", "-H", "unix:///run/d.sock", "ps"]
    with pytest.raises(ValidationError, match="not a docker daemon address"):
        Inventory(name="i", docker={"host": "/run/d.sock"})

"""NvmlBackend, the real-GPU path: how it behaves without a driver here, and its own code
(profile index -> id, ctypes arrays and references, handles) run against the simulated GPU
through PynvmlSimulator, the pynvml-shaped facade over it."""

from __future__ import annotations

import ctypes.util
from dataclasses import replace
from pathlib import Path

import pynvml
import pytest

from tests.labs.pynvml_simulator import PynvmlSimulator
from vgpu import mig
from vgpu.nvml import errors
from vgpu.nvml.catalogue_check import check_catalogue, compare_catalogue
from vgpu.nvml.errors import MigError, NvmlUnavailable
from vgpu.nvml.layout import apply_layout
from vgpu.nvml.local_devices import mig_devices_for_bench
from vgpu.nvml.real import NvmlBackend, load_nvml
from vgpu.nvml.select import backend_for_this_machine
from vgpu.nvml.simulator import SimulatedGpuBackend
from vgpu.nvml.state import StateStore
from vgpu.nvml.teardown import destroy_layout

from .conftest import layout_of


def _has_nvml_library() -> bool:
    return ctypes.util.find_library("nvidia-ml") is not None


no_driver = pytest.mark.skipif(_has_nvml_library(), reason="gpu: this machine has an NVIDIA driver")


@no_driver
def test_without_a_driver_nvml_init_fails_cleanly() -> None:
    with pytest.raises(NvmlUnavailable, match="no NVIDIA driver: nvmlInit failed: NVML Shared "
                                              "Library Not Found"):
        load_nvml()


@no_driver
def test_without_a_driver_and_without_simulator_says_how_to_simulate(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VGPU_GPU_SIMULATOR", raising=False)
    with pytest.raises(NvmlUnavailable) as exc:
        backend_for_this_machine()
    assert "nvmlInit failed" in str(exc.value)
    assert "VGPU_GPU_SIMULATOR=A100-80GB" in str(exc.value)
    assert mig_devices_for_bench() == []


@no_driver
def test_without_a_driver_the_simulator_is_used_only_when_asked(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("VGPU_GPU_SIMULATOR", "2xA100-80GB")
    monkeypatch.setenv("VGPU_GPU_SIMULATOR_STATE", str(tmp_path / "sim.json"))
    backend = backend_for_this_machine()
    assert isinstance(backend, SimulatedGpuBackend)
    assert backend.description.startswith("SIMULATED GPU")
    assert [g.model_key for g in backend.gpus()] == ["A100-80GB", "A100-80GB"]


def test_a_real_gpu_wins_over_the_simulator_request(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VGPU_GPU_SIMULATOR", "A100-80GB")
    library = PynvmlSimulator(SimulatedGpuBackend(["H100-80GB"]))

    def load() -> PynvmlSimulator:
        library.nvmlInit()
        return library

    backend = backend_for_this_machine(nvml_loader=load)
    assert isinstance(backend, NvmlBackend)
    assert not backend.simulated
    assert [g.model_key for g in backend.gpus()] == ["H100-80GB"]


@pytest.fixture
def nvml_backend(sim: SimulatedGpuBackend) -> NvmlBackend:
    return NvmlBackend(PynvmlSimulator.started(sim))


def test_gpu_listing_reads_model_from_pci_device_id(nvml_backend: NvmlBackend) -> None:
    [gpu] = nvml_backend.gpus()
    assert gpu.pci_device_id == 0x20B2 and gpu.model_key == "A100-80GB"
    assert gpu.memory_mb == 80 * 1024 and gpu.pci_bus_id == "00000000:17:00.0"
    assert nvml_backend.driver_info().cuda_version == "12.4"


def test_profiles_are_read_by_index_and_reported_with_their_ids(
        nvml_backend: NvmlBackend) -> None:
    profiles = {p.name: p for p in nvml_backend.gpu_instance_profiles(0)}
    one = profiles["1g.10gb"]
    assert (one.index, one.id) == (pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19)
    assert [(s.start, s.size) for s in profiles["3g.40gb"].placements] == [(0, 4), (4, 4)]
    assert len(profiles["1g.10gb+me"].placements) == 7  # more placements than instances
    assert compare_catalogue(mig.GPU_MODELS["A100-80GB"],
                             nvml_backend.gpu_instance_profiles(0)) == []


def test_bm6_through_nvml_backend_is_created_verified_and_destroyed(
        nvml_backend: NvmlBackend, sim: SimulatedGpuBackend, store: StateStore) -> None:
    result = apply_layout(nvml_backend, layout_of("bm6"), store)

    assert sorted((gi.profile_id, gi.start) for gi in sim.gpu_instances(0)) == [
        (5, 0), (14, 4), (19, 6)]
    assert [d.uuid for d in nvml_backend.mig_devices(0)] == [d.uuid for d in sim.mig_devices(0)]
    assert [d.profile for d in nvml_backend.mig_devices(0)] == ["4g.40gb", "2g.20gb", "1g.10gb"]
    assert sorted(c.uuid or "" for c in result.created) == sorted(
        d.uuid for d in sim.mig_devices(0))
    bench = mig_devices_for_bench(nvml_backend, store=store)
    assert [(d.profile, d.start, d.simulated, d.owner) for d in bench] == [
        ("4g.40gb", 0, False, "bm6-4g"), ("2g.20gb", 4, False, "bm6-2g"),
        ("1g.10gb", 6, False, "bm6-1g")]

    destroy_layout(nvml_backend, 0, store)
    assert sim.gpu_instances(0) == []


def test_nvml_refusals_arrive_as_mig_errors_with_the_driver_code(
        nvml_backend: NvmlBackend) -> None:
    nvml_backend.create_gpu_instance(0, 5, 0, 4)
    with pytest.raises(MigError) as exc:
        nvml_backend.create_gpu_instance(0, 9, 0, 4)
    assert exc.value.code == errors.INSUFFICIENT_RESOURCES
    assert "Insufficient Resources" in str(exc.value)


def test_enable_mig_through_nvml_backend_reports_the_pending_reset(
        tmp_path: Path) -> None:
    backend = NvmlBackend(PynvmlSimulator.started(SimulatedGpuBackend(["A100-80GB"])))
    mode = backend.set_mig_mode(0, True)
    assert (mode.current, mode.pending, mode.reset_pending) == (False, True, True)
    assert backend.mig_devices(0) == []


def test_catalogue_check_names_every_difference(nvml_backend: NvmlBackend) -> None:
    reported = nvml_backend.gpu_instance_profiles(0)
    doctored = [replace(p, id=99, placements=p.placements[:2]) if p.name == "1g.10gb" else p
                for p in reported if p.name != "7g.80gb"]
    doctored.append(replace(reported[0], index=13, id=33, name="1g.10gb+gfx"))

    diffs = {(d.profile, d.field): d for d in compare_catalogue(
        mig.GPU_MODELS["A100-80GB"], doctored)}

    assert set(diffs) == {("1g.10gb", "profile id"), ("1g.10gb", "placements (start:size)"),
                          ("7g.80gb", "profile index"), ("1g.10gb+gfx", "profile index")}
    assert (diffs["1g.10gb", "profile id"].catalogue, diffs["1g.10gb", "profile id"].nvml) == (
        "19", "99")
    assert diffs["7g.80gb", "profile index"].nvml == "not offered"


def test_catalogue_check_with_mig_off_compares_what_the_driver_lists() -> None:
    sim = SimulatedGpuBackend(["A100-80GB"])
    placements_hidden = PynvmlSimulator.started(sim, hidden_without_mig="placements")
    report = check_catalogue(NvmlBackend(placements_hidden), 0)
    assert report.differences == []
    assert any("placements were not compared" in n for n in report.notes)

    profiles_hidden = PynvmlSimulator.started(sim, hidden_without_mig="profiles")
    with pytest.raises(NvmlUnavailable, match="lists profiles only with MIG mode on"):
        check_catalogue(NvmlBackend(profiles_hidden), 0)


def test_a_driver_without_the_v2_profile_call_still_gets_profile_names() -> None:
    library = PynvmlSimulator.started(SimulatedGpuBackend(["A100-80GB"]), old_driver=True)
    profiles = NvmlBackend(library).gpu_instance_profiles(0)
    assert sorted(p.name for p in profiles) == sorted(mig.GPU_MODELS["A100-80GB"].profile_names())
    assert compare_catalogue(mig.GPU_MODELS["A100-80GB"], profiles) == []

"""The GPU simulator as a MIG-backed vGPU guest sees its GPUs: one GPU per vGPU named by
its vGPU type, MIG on, the MIG device of the GPU instance vSphere made under it (own MIG-
UUID), and no MIG change allowed from inside the guest (Not Supported)."""

from __future__ import annotations

import pytest

from vgpu.nvml import errors
from vgpu.nvml.errors import MigError
from vgpu.nvml.local_devices import mig_devices_for_bench
from vgpu.nvml.simulator import SimulatedGpuBackend


def test_each_vgpu_is_a_gpu_with_one_mig_device_of_its_profile() -> None:
    sim = SimulatedGpuBackend.mig_backed_vgpu_guest(["A100D-4-40C", "grid_a100d-4-40c"])
    assert [g.name for g in sim.gpus()] == ["GRID A100D-4-40C (simulated)"] * 2
    assert [g.memory_mb for g in sim.gpus()] == [40 * 1024] * 2
    assert all(sim.mig_mode(g.index).current for g in sim.gpus())
    devices = [d for g in sim.gpus() for d in sim.mig_devices(g.index)]
    assert [(d.gpu_index, d.profile) for d in devices] == [(0, "4g.40gb"), (1, "4g.40gb")]
    assert len({d.uuid for d in devices} | {g.uuid for g in sim.gpus()}) == 4


def test_the_guest_cannot_change_mig() -> None:
    sim = SimulatedGpuBackend.mig_backed_vgpu_guest(["A100D-1-10C"])
    for attempt in (lambda: sim.set_mig_mode(0, False),
                    lambda: sim.create_gpu_instance(0, 19, 1, 1),
                    lambda: sim.destroy_gpu_instance(0, 1),
                    lambda: sim.gpu_instances(0)):
        with pytest.raises(MigError) as refused:
            attempt()
        assert refused.value.code == errors.NOT_SUPPORTED
        assert "vSphere creates" in str(refused.value)


def test_bench_lists_the_guest_mig_device_without_listing_instances() -> None:
    sim = SimulatedGpuBackend.mig_backed_vgpu_guest(["A100D-3-40C"])
    [found] = mig_devices_for_bench(sim)
    assert (found.profile, found.uuid, found.start) == ("3g.40gb", sim.mig_devices(0)[0].uuid,
                                                        None)

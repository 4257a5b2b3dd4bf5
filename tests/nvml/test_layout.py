"""Bare-metal layouts created, verified and destroyed on the simulated GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vgpu.errors import InputError, ParameterError
from vgpu.nvml import errors
from vgpu.nvml.errors import MIG_DISABLED, MIG_SWITCH, LayoutError, MigError
from vgpu.nvml.layout import apply_layout
from vgpu.nvml.local_devices import mig_devices_for_bench
from vgpu.nvml.simulator import SimulatedGpuBackend
from vgpu.nvml.state import StateStore
from vgpu.nvml.teardown import destroy_layout

from .conftest import layout_of

A100_80 = {"7g.80gb": 0, "4g.40gb": 5, "3g.40gb": 9, "2g.20gb": 14, "1g.20gb": 15,
           "1g.10gb": 19, "1g.10gb+me": 20}


def _layout(sim: SimulatedGpuBackend) -> list[tuple[str, int]]:
    names = {v: k for k, v in A100_80.items()}
    return sorted((names[gi.profile_id], gi.start) for gi in sim.gpu_instances(0))


@pytest.mark.parametrize(("scenario", "expected"), [
    ("bm6", [("1g.10gb", 6), ("2g.20gb", 4), ("4g.40gb", 0)]),
    ("bm8", [("1g.10gb", s) for s in range(7)]),
])
def test_scenario_layout_is_created_verified_and_destroyed(
        sim: SimulatedGpuBackend, store: StateStore, scenario: str,
        expected: list[tuple[str, int]]) -> None:
    result = apply_layout(sim, layout_of(scenario), store)

    assert _layout(sim) == expected
    # NVML profile ids, not profile indexes, reached the GPU.
    assert {gi.profile_id for gi in sim.gpu_instances(0)} == {A100_80[p] for p, _ in expected}
    assert all(len(gi.compute_instances) == 1 for gi in sim.gpu_instances(0))
    uuids = [c.uuid or "" for c in result.created]
    assert len(set(uuids)) == len(expected) and all(u and u.startswith("MIG-") for u in uuids)
    bench = mig_devices_for_bench(sim, store=store)
    assert sorted((d.profile, d.start) for d in bench) == expected
    assert sorted(d.uuid for d in bench) == sorted(uuids)
    assert all(d.simulated for d in bench)
    assert {d.owner for d in bench} == {c.owner for c in result.created}
    assert {d.owner for d in bench} >= {f"{scenario}-1g" if scenario == "bm6" else "bm8-1g-1"}
    recorded = json.loads(store.file_for(0).read_text())
    assert recorded["scenario"] == scenario and len(recorded["created"]) == len(expected)

    again = apply_layout(sim, layout_of(scenario), store)
    assert again.already_applied and [c.uuid for c in again.created] == uuids

    destroy_layout(sim, 0, store)
    assert sim.gpu_instances(0) == []
    assert not store.file_for(0).exists()
    assert mig_devices_for_bench(sim, store=store) == []


def test_uuids_are_stable_across_processes_and_new_after_recreation(
        tmp_path: Path, store: StateStore) -> None:
    state = tmp_path / "simgpu.json"
    first = SimulatedGpuBackend(["A100-80GB"], state_file=state, mig_enabled=True)
    created = apply_layout(first, layout_of("bm6"), store).created
    reloaded = SimulatedGpuBackend(state_file=state)
    assert [d.uuid for d in reloaded.mig_devices(0)] == [c.uuid for c in created]
    destroy_layout(reloaded, 0, store)
    recreated = apply_layout(reloaded, layout_of("bm6"), store).created
    assert not {c.uuid for c in created} & {c.uuid for c in recreated}


def test_foreign_instance_is_kept_and_counted_as_occupied(
        sim: SimulatedGpuBackend, store: StateStore) -> None:
    foreign = sim.create_gpu_instance(0, A100_80["2g.20gb"], 0, 2)
    sim.create_compute_instance(0, foreign.id)
    messages: list[str] = []

    result = apply_layout(sim, layout_of("bm3"), store, log=messages.append)

    # The planned 3g.40gb at start 0 overlaps the held 2g.20gb: it moves to start 4.
    assert _layout(sim) == [("2g.20gb", 0), ("3g.40gb", 4)]
    assert [(c.profile, c.start) for c in result.created] == [("3g.40gb", 4)]
    assert any("start 4 instead of the planned 0" in m for m in messages)
    everything = mig_devices_for_bench(sim, store=store)
    assert [(d.profile, d.owner) for d in everything] == [("2g.20gb", None),
                                                          ("3g.40gb", "bm3-3g")]
    ours = mig_devices_for_bench(sim, store=store, only_created=True)
    assert [(d.profile, d.start) for d in ours] == [("3g.40gb", 4)]
    again = apply_layout(sim, layout_of("bm3"), store)
    assert again.already_applied and again.created[0].uuid == result.created[0].uuid
    destroy_layout(sim, 0, store)
    assert _layout(sim) == [("2g.20gb", 0)]
    assert sim.gpu_instances(0)[0].id == foreign.id


def test_layout_that_does_not_fit_beside_held_instances_changes_nothing(
        sim: SimulatedGpuBackend, store: StateStore) -> None:
    foreign = sim.create_gpu_instance(0, A100_80["1g.10gb"], 6, 1)
    state_file = sim.state_file
    assert state_file is not None
    before = state_file.read_text()

    with pytest.raises(LayoutError) as exc:
        apply_layout(sim, layout_of("bm6"), store)

    assert "1g.10gb@6 (GPU instance" in str(exc.value)
    assert "--replace-existing" in str(exc.value)
    assert state_file.read_text() == before
    assert [gi.id for gi in sim.gpu_instances(0)] == [foreign.id]


def test_replace_existing_saves_held_instances_and_restore_puts_them_back(
        sim: SimulatedGpuBackend, store: StateStore) -> None:
    held = sim.create_gpu_instance(0, A100_80["1g.10gb"], 6, 1)
    sim.create_compute_instance(0, held.id)

    apply_layout(sim, layout_of("bm6"), store, replace_existing=True)
    assert _layout(sim) == [("1g.10gb", 6), ("2g.20gb", 4), ("4g.40gb", 0)]

    result = destroy_layout(sim, 0, store, restore=True)
    assert _layout(sim) == [("1g.10gb", 6)]
    assert len(sim.gpu_instances(0)[0].compute_instances) == 1
    assert any("restored 1g.10gb@6" in a for a in result.actions)


def test_mig_disabled_without_enable_flag_is_an_input_error_and_changes_nothing(
        tmp_path: Path, store: StateStore) -> None:
    sim = SimulatedGpuBackend(["A100-80GB"], state_file=tmp_path / "simgpu.json")
    before = (tmp_path / "simgpu.json").read_text()
    with pytest.raises(InputError) as exc:
        apply_layout(sim, layout_of("bm6"), store)
    assert exc.value.exit_code == 2
    # The domain names the parameter and the reason, never a flag (the CLI names it).
    assert isinstance(exc.value, ParameterError)
    assert (exc.value.parameter, exc.value.reason) == (MIG_SWITCH, MIG_DISABLED)
    assert "--" not in str(exc.value)
    assert "Nothing was changed" in str(exc.value)
    assert (tmp_path / "simgpu.json").read_text() == before
    assert not store.file_for(0).exists()


def test_enable_mig_stops_at_the_pending_reset_then_completes_and_restores(
        tmp_path: Path, store: StateStore) -> None:
    sim = SimulatedGpuBackend(["A100-80GB"], state_file=tmp_path / "simgpu.json")
    warnings: list[str] = []
    with pytest.raises(LayoutError, match="nvidia-smi --gpu-reset -i 0"):
        apply_layout(sim, layout_of("bm8"), store, enable_mig=True, log=warnings.append)
    assert any(w.startswith("WARNING: enabling MIG mode") for w in warnings)
    mode = sim.mig_mode(0)
    assert (mode.current, mode.pending) == (False, True)
    with pytest.raises(LayoutError, match="reset is pending"):
        apply_layout(sim, layout_of("bm8"), store)

    sim.reset(0)
    apply_layout(sim, layout_of("bm8"), store)
    assert len(sim.mig_devices(0)) == 7

    destroy_layout(sim, 0, store, restore=True)
    mode = sim.mig_mode(0)
    assert (mode.current, mode.pending) == (True, False)  # back off after the next reset


def test_enable_mig_on_a_busy_gpu_refuses(tmp_path: Path, store: StateStore) -> None:
    sim = SimulatedGpuBackend(["A100-80GB"], state_file=tmp_path / "simgpu.json")
    sim.set_processes(0, [4242])
    with pytest.raises(LayoutError, match=r"busy .*4242"):
        apply_layout(sim, layout_of("bm8"), store, enable_mig=True)
    assert not sim.mig_mode(0).pending


def test_dry_run_changes_nothing(sim: SimulatedGpuBackend, store: StateStore) -> None:
    state_file = sim.state_file
    assert state_file is not None
    before = state_file.read_text()
    result = apply_layout(sim, layout_of("bm6"), store, dry_run=True)
    assert result.actions == ["would create 4g.40gb@0 for bm6-4g",
                              "would create 2g.20gb@4 for bm6-2g",
                              "would create 1g.10gb@6 for bm6-1g"]
    assert state_file.read_text() == before
    assert not store.file_for(0).exists()


def test_destroy_refuses_an_instance_in_use_and_keeps_its_record(
        sim: SimulatedGpuBackend, store: StateStore) -> None:
    apply_layout(sim, layout_of("bm6"), store)
    busy = next(gi for gi in sim.gpu_instances(0) if gi.start == 4)
    sim.set_instance_busy(0, busy.id, [777])

    with pytest.raises(LayoutError, match=r"2g\.20gb@4.*In use by another client"):
        destroy_layout(sim, 0, store)
    assert _layout(sim) == [("2g.20gb", 4)]
    kept = StateStore(store.directory).load(0)
    assert kept is not None and [c.profile for c in kept.created] == ["2g.20gb"]

    sim.set_instance_busy(0, busy.id, [])
    destroy_layout(sim, 0, store)
    assert sim.gpu_instances(0) == []


def test_a_different_layout_replaces_the_earlier_one_of_ours(
        sim: SimulatedGpuBackend, store: StateStore) -> None:
    apply_layout(sim, layout_of("bm6"), store)
    apply_layout(sim, layout_of("bm8"), store)
    assert _layout(sim) == [("1g.10gb", s) for s in range(7)]
    state = store.load(0)
    assert state is not None and state.scenario == "bm8" and len(state.created) == 7


def test_wrong_gpu_model_is_an_input_error(tmp_path: Path, store: StateStore) -> None:
    sim = SimulatedGpuBackend(["H100-80GB"], state_file=tmp_path / "s.json", mig_enabled=True)
    with pytest.raises(InputError, match="for A100-80GB, but GPU 0 is NVIDIA H100"):
        apply_layout(sim, layout_of("bm6"), store)
    assert sim.gpu_instances(0) == []


def test_simulator_refuses_like_the_driver(sim: SimulatedGpuBackend) -> None:
    gi = sim.create_gpu_instance(0, A100_80["4g.40gb"], 0, 4)
    with pytest.raises(MigError) as overlap:
        sim.create_gpu_instance(0, A100_80["2g.20gb"], 2, 2)
    assert overlap.value.code == errors.INSUFFICIENT_RESOURCES
    assert "Insufficient Resources" in str(overlap.value)
    with pytest.raises(MigError) as second:
        sim.create_gpu_instance(0, A100_80["4g.40gb"], 0, 4)
    assert second.value.insufficient_resources
    with pytest.raises(MigError) as bad_start:
        sim.create_gpu_instance(0, A100_80["2g.20gb"], 5, 2)
    assert bad_start.value.code == errors.INVALID_ARGUMENT
    sim.create_compute_instance(0, gi.id)
    with pytest.raises(MigError) as in_use:
        sim.destroy_gpu_instance(0, gi.id)
    assert in_use.value.in_use and "In use by another client" in str(in_use.value)
    with pytest.raises(MigError) as off:
        SimulatedGpuBackend(["A100-80GB"]).create_gpu_instance(0, 19, 0, 1)
    assert off.value.code == errors.NOT_SUPPORTED


def test_instances_removed_behind_vgpus_back_are_forgotten_and_recreated(
        sim: SimulatedGpuBackend, store: StateStore) -> None:
    first = {c.owner: c.uuid for c in apply_layout(sim, layout_of("bm6"), store).created}
    for gi in sim.gpu_instances(0):
        if gi.start == 4:
            sim.destroy_compute_instance(0, gi.id, gi.compute_instances[0].id)
            sim.destroy_gpu_instance(0, gi.id)
    notes: list[str] = []

    result = apply_layout(sim, layout_of("bm6"), store, log=notes.append)

    assert any("2g.20gb@4 (bm6-2g) that vgpu created is gone" in n for n in notes)
    assert _layout(sim) == [("1g.10gb", 6), ("2g.20gb", 4), ("4g.40gb", 0)]
    assert sorted(c.owner for c in result.created) == ["bm6-1g", "bm6-2g", "bm6-4g"]
    assert len(result.devices) == 3
    # Only the missing instance was created; the others kept their MIG devices.
    assert [a for a in result.actions if a.startswith("created")] == [
        "created 2g.20gb@4 for bm6-2g (GPU instance 2, compute instance 0)"]
    now = {c.owner: c.uuid for c in result.created}
    assert now["bm6-4g"] == first["bm6-4g"] and now["bm6-1g"] == first["bm6-1g"]
    assert now["bm6-2g"] != first["bm6-2g"]


def test_an_earlier_layout_in_use_blocks_a_new_one(sim: SimulatedGpuBackend,
                                                  store: StateStore) -> None:
    apply_layout(sim, layout_of("bm6"), store)
    busy = next(gi for gi in sim.gpu_instances(0) if gi.start == 0)
    sim.set_instance_busy(0, busy.id, [99])
    with pytest.raises(LayoutError, match="earlier vgpu layout could not be removed"):
        apply_layout(sim, layout_of("bm8"), store)
    assert ("4g.40gb", 0) in _layout(sim)


def test_without_root_bench_still_gets_the_mig_devices(tmp_path: Path,
                                                      store: StateStore) -> None:
    state = tmp_path / "simgpu.json"
    created = apply_layout(SimulatedGpuBackend(["A100-80GB"], state_file=state,
                                               mig_enabled=True), layout_of("bm6"), store).created
    user = SimulatedGpuBackend(state_file=state, privileged=False)

    with pytest.raises(MigError) as exc:
        user.gpu_instances(0)
    assert exc.value.code == errors.NO_PERMISSION and "sudo" in str(exc.value)
    devices = mig_devices_for_bench(user, store=store)
    assert sorted((d.profile, d.uuid, d.owner) for d in devices) == sorted(
        (c.profile, c.uuid, c.owner) for c in created)
    assert all(d.start is None for d in devices)
    with pytest.raises(MigError, match=r"Insufficient Permissions .*run with sudo"):
        apply_layout(user, layout_of("bm8"), store)


def test_dry_run_with_enable_mig_only_says_what_would_happen(tmp_path: Path,
                                                            store: StateStore) -> None:
    sim = SimulatedGpuBackend(["A100-80GB"], state_file=tmp_path / "simgpu.json")
    before = (tmp_path / "simgpu.json").read_text()
    result = apply_layout(sim, layout_of("bm6"), store, enable_mig=True, dry_run=True)
    assert result.actions[0] == "would enable MIG mode on GPU 0 (needs a GPU reset)"
    assert len(result.actions) == 4
    assert (tmp_path / "simgpu.json").read_text() == before
    assert not store.file_for(0).exists()

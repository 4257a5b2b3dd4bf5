"""The MIG catalogue and solver, checked against the published geometry and against a
brute-force enumerator."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vgpu import mig

A100 = mig.gpu_model("A100-80GB")


def profiles(gpu: mig.GpuModel, *names: str) -> list[mig.MigProfile]:
    return [mig.parse_mig_profile(n, gpu) for n in names]


def brute_force_fits(gpu: mig.GpuModel, wanted: Sequence[mig.MigProfile]) -> bool:
    """Try every combination of allowed starts: the definition of 'placeable'."""
    counts = Counter(p.name for p in wanted)
    if any(counts[p.name] > p.shape.max_count for p in wanted):
        return False
    if sum(p.compute_slices for p in wanted) > gpu.compute_slices:
        return False
    for starts in itertools.product(*(p.shape.starts for p in wanted)):
        used = [False] * gpu.memory_slices
        ok = True
        for p, s in zip(wanted, starts, strict=True):
            for k in range(s, s + p.memory_slices):
                if k >= gpu.memory_slices or used[k]:
                    ok = False
                    break
                used[k] = True
            if not ok:
                break
        if ok:
            return True
    return False


def test_seven_1g_fill_starts_0_to_6() -> None:
    result = mig.solve(A100, profiles(A100, *["1g.10gb"] * 7))
    assert result.ok and result.placements
    assert [p.start for p in result.placements] == [0, 1, 2, 3, 4, 5, 6]


def test_scenario_6_layout() -> None:
    result = mig.solve(A100, profiles(A100, "4g.40gb", "2g.20gb", "1g.10gb"))
    assert result.placements is not None
    assert [(p.profile.name, p.start) for p in result.placements] == [
        ("4g.40gb", 0), ("2g.20gb", 4), ("1g.10gb", 6)]


def test_4g_3g_1g_refused_with_reason_and_suggestions() -> None:
    result = mig.solve(A100, profiles(A100, "4g.40gb", "3g.40gb", "1g.10gb"))
    assert not result.ok
    assert result.reason == ("4g.40gb + 3g.40gb + 1g.10gb needs 8 compute slices; "
                             "one A100-80GB has 7")
    descriptions = [s.description for s in result.suggestions]
    assert "drop 1g.10gb" in descriptions
    for s in result.suggestions:
        assert mig.is_placeable(A100, [A100.profile(n) for n in s.profiles])


def test_3g_2g_2g_accepted_by_backtracking() -> None:
    result = mig.solve(A100, profiles(A100, "3g.40gb", "2g.20gb", "2g.20gb"))
    assert result.placements is not None
    assert sorted((p.profile.name, p.start) for p in result.placements) == [
        ("2g.20gb", 0), ("2g.20gb", 2), ("3g.40gb", 4)]


def test_reasons_name_the_broken_rule() -> None:
    over_count = mig.solve(A100, profiles(A100, *["2g.20gb"] * 4))
    assert over_count.reason == "4 x 2g.20gb exceeds the profile's maximum of 3 on one A100-80GB"
    over_memory = mig.solve(A100, profiles(A100, *["1g.20gb"] * 4, "1g.10gb"))
    assert over_memory.reason is not None and "needs 9 memory slices" in over_memory.reason
    fragmented = mig.solve(A100, profiles(A100, "3g.40gb"), occupied=[
        mig.MigPlacement(A100.profile("1g.10gb"), 1), mig.MigPlacement(A100.profile("1g.10gb"), 5)])
    assert fragmented.reason is not None
    assert fragmented.reason.startswith("no start position left for 3g.40gb")


def test_held_instances_are_respected() -> None:
    held = [mig.MigPlacement(A100.profile("4g.40gb"), 0, owner="other")]
    assert not mig.solve(A100, profiles(A100, "7g.80gb"), occupied=held).ok
    ok = mig.solve(A100, profiles(A100, "3g.40gb"), occupied=held)
    assert ok.placements is not None and ok.placements[0].start == 4


def test_multi_gpu_spreads_when_one_is_full() -> None:
    result = mig.solve(A100, profiles(A100, "7g.80gb", "4g.40gb", "3g.40gb"), num_gpus=2)
    assert result.placements is not None
    by_gpu = {(p.profile.name, p.gpu) for p in result.placements}
    assert ("7g.80gb", 0) in by_gpu or ("7g.80gb", 1) in by_gpu
    assert len({p.gpu for p in result.placements}) == 2


@pytest.mark.parametrize("spelling", ["1g.10gb", "MIG 1g.10gb", "A100D-1-10C",
                                      "grid_a100d-1-10c", "nvidia-1-10c", "nvidia_a100d-1-10c"])
def test_accepted_spellings(spelling: str) -> None:
    assert mig.parse_mig_profile(spelling, A100).name == "1g.10gb"


def test_media_extension_and_bad_names() -> None:
    assert mig.parse_mig_profile("A100D-1-10CME", A100).name == "1g.10gb+me"
    with pytest.raises(mig.ProfileParseError) as info:
        mig.parse_mig_profile("5g.50gb", A100)
    assert str(info.value).startswith("'5g.50gb' is not a MIG profile of A100-80GB; valid: "
                                      "1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb")
    with pytest.raises(mig.ProfileParseError, match="names board A100"):
        mig.parse_mig_profile("A100-1-5C", A100)


def test_one_source_of_truth_for_names_and_ids() -> None:
    p = A100.profile("3g.40gb")
    assert (p.shape.nvml_index, p.shape.nvml_id) == (2, 9)
    assert p.vgpu_type("A100D") == "A100D-3-40C"
    assert A100.host_type_candidates(p.vgpu_type("A100D"))[0] == "grid_a100d-3-40c"
    h200 = mig.gpu_model("H200")
    assert h200.profile_names() == ["1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb",
                                    "4g.71gb", "7g.141gb"]
    assert h200.placements_assumed
    a30 = mig.gpu_model("A30")
    assert a30.profile("2g.12gb").shape.nvml_id == 5
    assert mig.gpu_model_for_pci(0x20B5) is A100


def test_slot_diagram_marks_each_slice() -> None:
    result = mig.solve(A100, profiles(A100, "4g.40gb", "2g.20gb", "1g.10gb"))
    assert result.placements is not None
    header, row = mig.slot_diagram(A100, result.placements)
    assert header.count("|") == 9
    assert row.split("|")[1:-1] == ["4g.40gb" + " " * 24, "2g.20gb" + " " * 8, "1g.10gb",
                                    "free   "]


ALL_GPUS = list(mig.GPU_MODELS.values())


@st.composite
def requests(draw: st.DrawFn) -> tuple[mig.GpuModel, list[mig.MigProfile]]:
    gpu = draw(st.sampled_from(ALL_GPUS))
    chosen = draw(st.lists(st.sampled_from(gpu.profiles), min_size=1, max_size=8))
    return gpu, chosen


@settings(max_examples=400, deadline=None)
@given(requests())
def test_solver_agrees_with_brute_force(case: tuple[mig.GpuModel, list[mig.MigProfile]]) -> None:
    gpu, wanted = case
    result = mig.solve(gpu, wanted)
    assert result.ok == brute_force_fits(gpu, wanted)
    if result.placements is not None:
        placements = result.placements
        assert [p.profile for p in placements] == wanted
        for a, b in itertools.combinations(placements, 2):
            assert not a.overlaps(b)
        for p in placements:
            assert p.start in p.profile.shape.starts
            assert p.end <= gpu.memory_slices
    else:
        assert result.reason


def test_every_enumerated_layout_is_valid() -> None:
    layouts = mig.enumerate_layouts(A100)
    assert ("1g.10gb",) * 7 in layouts
    assert ("1g.10gb", "2g.20gb", "4g.40gb") in layouts
    for layout in layouts:
        assert brute_force_fits(A100, [A100.profile(n) for n in layout])

"""Bare-metal plans -> per-GPU MIG layouts, and the input errors on the way."""

from __future__ import annotations

import pytest

from vgpu import catalog
from vgpu.errors import InputError
from vgpu.nvml.from_plan import layouts_from_plan
from vgpu.nvml.spec import LayoutSpec
from vgpu.planner import build_plan


def test_bm6_plan_gives_the_vm_layout_of_scenario_6() -> None:
    vm_plan = build_plan(catalog.load("6"))
    vm_slices = sorted((s.profile, s.start) for g in vm_plan.gpus for s in g.slices)
    [spec] = layouts_from_plan(build_plan(catalog.load("bm6")))
    assert sorted((s.profile, s.start) for s in spec.slices) == vm_slices
    assert (spec.gpu, spec.model, spec.scenario) == (0, "A100-80GB", "bm6")
    assert LayoutSpec.from_json(spec.to_json()) == spec


def test_gpu_option_maps_the_planned_gpu() -> None:
    [spec] = layouts_from_plan(build_plan(catalog.load("bm8")), [3])
    assert spec.gpu == 3 and len(spec.slices) == 7


@pytest.mark.parametrize(("scenario", "kwargs", "message"), [
    ("6", {}, "use its bare-metal counterpart"),
    ("bm6", {"host": "elsewhere"}, "the plan has no host 'elsewhere'"),
])
def test_refusals_are_input_errors(scenario: str, kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(InputError, match=message) as exc:
        layouts_from_plan(build_plan(catalog.load(scenario)), **kwargs)  # type: ignore[arg-type]
    assert exc.value.exit_code == 2


def test_unreadable_layout_json_is_refused() -> None:
    with pytest.raises(ValueError, match="not a MIG layout"):
        LayoutSpec.from_json({"model": "A100-80GB", "slices": [{"profile": "5g.50gb",
                                                                 "start": 0}]})

"""The one name rule (vgpu/model/names.py) for VM names, name patterns, scenario ids,
workload names and inventory host names."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from vgpu.model.inventory import BareMetalHost, EsxiHost
from vgpu.model.names import MAX_NAME_LENGTH, expand_pattern, name_problem, pattern_problem
from vgpu.model.scenario import InferenceWorkload, VmSpec


@pytest.mark.parametrize("name", ["vm1", "s6-4g", "DC0_C0_H0", "r750xa-01.lab.example.com",
                                  "6", "train_multinode_4", "x" * MAX_NAME_LENGTH])
def test_valid_names(name: str) -> None:
    assert name_problem(name) is None


@pytest.mark.parametrize(("name", "reason"), [
    ("", "is empty"),
    ("x" * 81, "is 81 characters long; vSphere allows at most 80"),
    ("vm 1", "contains ' '"),
    ("a/b", "contains '/'"),
    ("a..b", "contains '..'"),
    ("..", "starts with '.'"),
    ("-rf", "starts with '-'"),
    ("vm$(id)", "contains '$'"),
    ("vm\n1", "contains '\\n'"),
    ("vmé", "contains 'é'"),
])
def test_invalid_names(name: str, reason: str) -> None:
    assert name_problem(name) == reason


def test_expansion_is_unchanged() -> None:
    assert expand_pattern("vm", 1) == ["vm"]
    assert expand_pattern("vm", 3) == ["vm-1", "vm-2", "vm-3"]
    assert expand_pattern("bm-node-{n}", 2) == ["bm-node-1", "bm-node-2"]
    assert expand_pattern("vm{n:02d}", 2) == ["vm01", "vm02"]
    assert VmSpec(name="g-{n}", count=2).names() == ["g-1", "g-2"]


@pytest.mark.parametrize(("pattern", "reason"), [
    ("hx-{x}", "uses {x}; the only field a pattern may use is {n} (the VM's number)"),
    ("hx-{}", "uses {}; the only field"),
    ("hx-{0}", "uses {0}; the only field"),
    ("hx-{n.real}", "uses {n.real}; the only field"),
    ("hx-{n!r}", "uses {n!r}; the only field"),
    ("vm-{n", "is not a valid pattern (a '{' is never closed)"),
    ("vm-n}", "is not a valid pattern (a '}' has no matching '{')"),
    ("vm-{n:q}", "is not a valid pattern (Unknown format code 'q'"),
    ("vm {n}", "gives the name 'vm 1', which contains ' '"),
])
def test_invalid_patterns(pattern: str, reason: str) -> None:
    problem = pattern_problem(pattern)
    assert problem is not None and problem.startswith(reason)
    with pytest.raises(ValidationError, match="name pattern"):
        VmSpec(name=pattern, count=2)


@pytest.mark.parametrize("model", [
    lambda name: EsxiHost(name=name),
    lambda name: BareMetalHost(name=name, address="local"),
    lambda name: InferenceWorkload(name=name, model="resnet50"),
    lambda name: VmSpec(name=name),
])
def test_every_name_field_uses_the_rule(model: object) -> None:
    assert callable(model)
    model("ok-name.1")
    with pytest.raises(ValidationError) as caught:
        model("bad name")
    [error] = caught.value.errors(include_url=False)
    assert error["msg"] == "name 'bad name' contains ' '"
    assert "1-80 of A-Z a-z 0-9 . _ -" in error["ctx"]["fix"]

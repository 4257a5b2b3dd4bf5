"""The reference pages are generated from the models; they must be current."""

from __future__ import annotations

from vgpu import docgen
from vgpu.model.scenario import Scenario


def test_reference_pages_are_current() -> None:
    for path, text in docgen.pages().items():
        assert path.read_text(encoding="utf-8") == text.rstrip() + "\n", (
            f"{path} is stale: run python -m vgpu.docgen")


def test_every_scenario_field_is_documented() -> None:
    page = docgen.pages()[docgen.DOCS / "scenarios.md"]
    for name in Scenario.model_fields:
        assert f"| `{name}` |" in page
    assert "| `duration_s` | float | `600` |" in page

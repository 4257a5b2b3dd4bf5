"""`scripts/test.sh --quick` leaves out every test that declares a lab, torch run, GPU or
slowness marker: a marker added to pyproject.toml must be named in its expression too."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _declared_markers() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return {line.split(":")[0] for line in config["tool"]["pytest"]["ini_options"]["markers"]}


def _quick_expression() -> str:
    found = re.search(r'^QUICK_MARKERS="(.+)"$', (ROOT / "scripts/run-pytest.sh").read_text(), re.M)
    assert found, "scripts/run-pytest.sh has no QUICK_MARKERS line"
    return found.group(1)


def test_the_quick_tier_leaves_out_every_declared_marker() -> None:
    expression = _quick_expression()
    assert expression.startswith("not (") and expression.endswith(")")
    left_out = set(expression.removeprefix("not (").removesuffix(")").split(" or "))
    assert left_out == _declared_markers()

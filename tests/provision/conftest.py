"""Fixtures for provisioning tests: loopback sshd labs (tests/labs/sshlab.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # tests.labs is imported by path from the repository root
    sys.path.insert(0, str(ROOT))

from tests.labs.sshlab import lab_available  # noqa: E402


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    reason = lab_available()
    for item in items:
        if "sshd" in item.keywords and reason:
            item.add_marker(pytest.mark.skip(reason=reason))

"""Provisioning tests that need the loopback sshd lab (marked ``sshd``) are skipped, with
the reason, where the lab cannot run (not root, sshd or sudo missing)."""

from __future__ import annotations

import pytest

from tests.labs.sshlab import lab_available


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    reason = lab_available()
    for item in items:
        if "sshd" in item.keywords and reason:
            item.add_marker(pytest.mark.skip(reason=reason))

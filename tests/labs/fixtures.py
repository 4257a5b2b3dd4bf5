"""One way for a test module to declare its lab fixture: the module says what its lab is
built from (``SshLab(2, sudo_password=...)``, a vCenter simulator of one host) and how it
is prepared; the factory opens it, yields it and closes it, whatever the test did.

    lab = ssh_lab(1, prepare=lambda lab: lab.hosts[0].set_sim("secure-boot", "enabled"))
    lab = ssh_lab(2, scope="module", sudo_password=SUDO_PASSWORD)

Assigned to a module-level name, the fixture is found as any fixture defined there."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any, Literal, TypeVar

import pytest

from tests.labs.sshlab import SshLab

Lab = TypeVar("Lab")
Scope = Literal["function", "module", "session"]


def lab_fixture(open_lab: Callable[[], AbstractContextManager[Lab]], *,
                prepare: Callable[[Lab], object] | None = None,
                scope: Scope = "function", name: str = "lab") -> Any:
    """A fixture named ``name`` that yields the lab ``open_lab()`` opens, prepared by
    ``prepare`` (set before any test sees it)."""

    def fixture() -> Iterator[Lab]:
        with open_lab() as lab:
            if prepare is not None:
                prepare(lab)
            yield lab

    return pytest.fixture(fixture, scope=scope, name=name)


def ssh_lab(n_hosts: int, *, prepare: Callable[[SshLab], object] | None = None,
            scope: Scope = "function", name: str = "lab", **options: Any) -> Any:
    """A fixture of ``n_hosts`` loopback sshd hosts; ``options`` are SshLab's."""
    return lab_fixture(lambda: SshLab(n_hosts, **options), prepare=prepare, scope=scope,
                       name=name)

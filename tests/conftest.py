"""Suite-wide plugins: the lab rule (a missing lab fails under CI, tests/labs/required.py)
and the Docker lab's fixtures, registered once for the whole session (a fixture imported
into several modules is one fixture per module, and a second lab would then wait on the
first one's lock)."""

import os

import pytest

from vgpu.results.store.disturbance import IGNORE_ENV

# The suite shares its machine with itself (and, on a developer's box, with others): real
# runs there are disturbed by design, and the tests of real runs are not about that. Set
# before any fixture runs a bench; tests of disturbance unset it (the `judged_disturbance`
# fixture).
os.environ.setdefault(IGNORE_ENV, "1")

# tests.bench.recording: one real recording of scenario 6, shared by tests of two folders
pytest_plugins = ["tests.labs.required", "tests.labs.dockerlab", "tests.bench.recording"]


@pytest.fixture(autouse=True)
def _no_default_inventory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands see only the inventory a test names: a lab file in the folder the suite runs
    from, or the user's own default, must not change what a test runs against."""
    monkeypatch.setenv("VGPU_INVENTORY", "none")


@pytest.fixture(autouse=True)
def _no_default_results_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands see only the results store a test names: a user's $VGPU_DB (say, the
    team's PostgreSQL store) must never receive test runs."""
    monkeypatch.delenv("VGPU_DB", raising=False)


@pytest.fixture(autouse=True)
def _own_audit_trail(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory,
                     ) -> None:
    """The audit trail of the changes a test makes goes to a store of its own, never to a
    vgpu-results.db in the folder the suite runs from."""
    monkeypatch.setenv("VGPU_AUDIT_DB", str(tmp_path_factory.mktemp("audit") / "audit.db"))


@pytest.fixture(autouse=True)
def _own_state_dir(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory,
                   ) -> None:
    """What vgpu remembers between runs (the VMs it created, MIG layouts) goes to a folder
    of the test's own, never to the user's ~/.local/state/vgpu."""
    monkeypatch.setenv("VGPU_STATE_DIR", str(tmp_path_factory.mktemp("vgpu-state")))


@pytest.fixture
def judged_disturbance(monkeypatch: pytest.MonkeyPatch) -> None:
    """Disturbed runs judged as on a real lab (the suite ignores them otherwise)."""
    monkeypatch.delenv(IGNORE_ENV, raising=False)



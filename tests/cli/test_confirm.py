"""The confirmation the vSphere commands ask before a change: --yes answers it, a terminal
is asked, and without one the command refuses, naming --yes."""

from __future__ import annotations

import io

import pytest

from vgpu.cli import common
from vgpu.errors import InputError


class _Stdin(io.StringIO):
    def __init__(self, text: str, *, tty: bool) -> None:
        super().__init__(text)
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def test_yes_answers_without_asking(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", _Stdin("", tty=False))
    assert common.terminal_confirm(True)("delete 3 VMs?") is True


def test_without_a_terminal_it_refuses_and_names_yes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", _Stdin("y\n", tty=False))
    with pytest.raises(InputError) as caught:
        common.terminal_confirm(False)("delete 3 VMs?")
    assert "--yes" in str(caught.value)


@pytest.mark.parametrize(("answer", "expected"), [("y\n", True), ("n\n", False), ("\n", False)])
def test_a_terminal_is_asked(monkeypatch: pytest.MonkeyPatch, answer: str,
                             expected: bool) -> None:
    monkeypatch.setattr("sys.stdin", _Stdin(answer, tty=True))
    assert common.terminal_confirm(False)("delete 3 VMs?") is expected

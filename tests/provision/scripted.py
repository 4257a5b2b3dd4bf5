"""A Transport that answers from a script instead of a host: the commands a step sends are
recorded, and each gets the answer of the first rule whose text it contains."""

from __future__ import annotations

from pathlib import Path

from vgpu.remote.hostlog import HostLog
from vgpu.remote.redact import Redactor
from vgpu.remote.transport import CommandResult, RemoteProcess, SudoSettings, Transport

Answer = tuple[int, str, str]  # exit code, stdout, stderr


class ScriptedTransport(Transport):
    """``rules``: command text -> answers, used in turn (the last one stays)."""

    def __init__(self, rules: dict[str, list[Answer]] | None = None,
                 name: str = "vm-1") -> None:
        super().__init__(name, SudoSettings(), HostLog(None, Redactor()))
        self.rules: dict[str, list[Answer]] = rules or {}
        self.commands: list[str] = []
        self.files: dict[str, bytes] = {}

    def answer(self, needle: str, *answers: Answer) -> None:
        self.rules[needle] = list(answers)

    def _execute(self, command: str, stdin: bytes | None, timeout: float | None) -> CommandResult:
        self.commands.append(command)
        for needle, answers in self.rules.items():
            if needle in command:
                code, out, err = answers.pop(0) if len(answers) > 1 else answers[0]
                return CommandResult(command, code, out, err, 0.0)
        return CommandResult(command, 0, "", "", 0.0)

    def _write_file(self, data: bytes, remote_path: str, mode: int) -> None:
        self.files[remote_path] = data

    def get(self, remote_path: str, local_path: Path) -> None:
        raise NotImplementedError

    def open_process(self, command: str) -> RemoteProcess:
        raise NotImplementedError

    def close(self) -> None:
        return None

    def ran(self, needle: str) -> list[str]:
        return [c for c in self.commands if needle in c]

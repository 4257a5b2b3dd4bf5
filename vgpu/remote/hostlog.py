"""One log file per host: every command, its output and every step outcome, redacted."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from vgpu.remote.redact import Redactor


class HostLog:
    """Append-only, line-buffered, thread-safe log of one host's session."""

    def __init__(self, path: Path | None, redactor: Redactor) -> None:
        self.path = path
        self.redactor = redactor
        self._lock = threading.Lock()
        self._partial: dict[str, str] = {}
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)

    def line(self, text: str) -> None:
        if self.path is None:
            return
        stamp = time.strftime("%H:%M:%S")
        cleaned = self.redactor.redact(text)
        with self._lock, self.path.open("a", encoding="utf-8") as handle:
            for line in cleaned.splitlines() or [""]:
                handle.write(f"{stamp} {line}\n")

    def stream(self, label: str, chunk: str) -> None:
        """Log command output as it arrives; holds a partial last line until it completes,
        so a secret is never split across two log writes."""
        text = self._partial.pop(label, "") + chunk
        lines = text.split("\n")
        self._partial[label] = lines.pop()
        for line in lines:
            self.line(f"  {label}| {line}")

    def flush_stream(self) -> None:
        for label, rest in list(self._partial.items()):
            if rest:
                self.line(f"  {label}| {rest}")
        self._partial.clear()

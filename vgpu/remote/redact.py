"""Keeps secrets (sudo passwords, licence token contents) out of everything printed,
logged or stored: every text that leaves the provisioning layer goes through a Redactor."""

from __future__ import annotations

import logging
import threading

MASK = "***"
# Very short strings would mask ordinary output (a password "1" would blank every digit);
# secrets that short are refused where they are read instead.
MIN_SECRET_LENGTH = 4


class Redactor:
    """A growing set of secrets and a ``redact(text)`` that masks every one of them."""

    def __init__(self, secrets: tuple[str, ...] = ()) -> None:
        self._lock = threading.Lock()
        self._secrets: list[str] = []
        for secret in secrets:
            self.add(secret)

    def add(self, secret: str) -> None:
        """Register a secret; multi-line secrets are also masked line by line."""
        pieces = {secret.strip(), *(line.strip() for line in secret.splitlines())}
        with self._lock:
            for piece in pieces:
                if len(piece) >= MIN_SECRET_LENGTH and piece not in self._secrets:
                    self._secrets.append(piece)
            self._secrets.sort(key=len, reverse=True)  # longest first: no partial leftovers

    def redact(self, text: str) -> str:
        with self._lock:
            secrets = list(self._secrets)
        for secret in secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return text

    def __len__(self) -> int:
        return len(self._secrets)


class RedactingFilter(logging.Filter):
    """A logging filter that masks secrets in each record's final message."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = self.redactor.redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True

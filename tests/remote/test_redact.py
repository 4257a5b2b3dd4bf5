"""Secrets are masked in every text that leaves the provisioning layer."""

from __future__ import annotations

import logging
from pathlib import Path

from rich.console import Console

from vgpu.provision.display import LiveTable
from vgpu.provision.step import Outcome
from vgpu.remote.hostlog import HostLog
from vgpu.remote.redact import MASK, RedactingFilter, Redactor


def test_masks_each_secret_and_each_line_of_multiline_ones() -> None:
    redactor = Redactor(("hunter22", "line-one-secret\nline-two-secret"))
    text = "pw=hunter22 a=line-one-secret b=line-two-secret"
    assert redactor.redact(text) == f"pw={MASK} a={MASK} b={MASK}"


def test_short_secrets_are_not_registered() -> None:
    redactor = Redactor(("ab",))
    assert len(redactor) == 0
    assert redactor.redact("ab cd") == "ab cd"


def test_longest_secret_wins_over_its_prefix() -> None:
    redactor = Redactor(("secret", "secret-token-full"))
    assert redactor.redact("x secret-token-full y") == f"x {MASK} y"


def test_log_stream_never_splits_a_secret(tmp_path: Path) -> None:
    log = HostLog(tmp_path / "h.log", Redactor(("TOPSECRET",)))
    log.stream("out", "start TOPS")
    log.stream("out", "ECRET end\nnext")
    log.flush_stream()
    text = (tmp_path / "h.log").read_text()
    assert "TOPSECRET" not in text and "TOPS" not in text
    assert f"start {MASK} end" in text and "next" in text


def test_logging_filter_masks_formatted_messages() -> None:
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    logger = logging.getLogger("vgpu.test.redact")
    handler = Keep()
    handler.addFilter(RedactingFilter(Redactor(("s3cr3tpw",))))
    logger.addHandler(handler)
    try:
        logger.warning("sudo password is %s", "s3cr3tpw")
    finally:
        logger.removeHandler(handler)
    assert records == [f"sudo password is {MASK}"]


def test_live_table_counts_outcomes_and_masks_details() -> None:
    redactor = Redactor(("hunter22",))
    table = LiveTable(["vm-1", "vm-2"], redactor)
    table.event("vm-1", "base-packages", Outcome.CHANGED, "installed")
    table.event("vm-1", "nvidia-driver", Outcome.OK, "driver 535")
    table.event("vm-2", "vgpu-licensing", Outcome.FAILED, "sudo pw hunter22 rejected")
    console = Console(record=True, width=200)
    console.print(table)
    text = console.export_text()
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
            for line in text.splitlines() if line.startswith("│")}
    assert rows["vm-1"] == ["nvidia-driver", "1", "1", "", "driver 535"]
    assert rows["vm-2"] == ["vgpu-licensing", "0", "0", "vgpu-licensing",
                            f"sudo pw {MASK} rejected"]

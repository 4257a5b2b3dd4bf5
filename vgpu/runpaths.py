"""Names for per-run folders and files that never collide: two runs started within the
same second (or at once from two processes) each get their own, because the name is
claimed with an atomic create rather than checked and then written. Also where vgpu keeps
what it must remember between runs (``state_dir``)."""

from __future__ import annotations

import os
import time
from pathlib import Path


def state_dir() -> Path:
    """vgpu's own state: $VGPU_STATE_DIR, else $XDG_STATE_HOME/vgpu, else
    ~/.local/state/vgpu."""
    if os.environ.get("VGPU_STATE_DIR"):
        return Path(os.environ["VGPU_STATE_DIR"])
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "vgpu"


def _stamp() -> str:
    return time.strftime("%Y%m%d-%H%M%S")


def new_run_dir(parent: Path, stem: str) -> Path:
    """Create and return ``parent/<stem>-<time>``, or ``...-2``, ``-3`` when taken."""
    parent.mkdir(parents=True, exist_ok=True)
    base = f"{stem}-{_stamp()}"
    n = 1
    while True:
        candidate = parent / (base if n == 1 else f"{base}-{n}")
        try:
            candidate.mkdir()
        except FileExistsError:
            n += 1
            continue
        return candidate


def new_run_file(directory: Path, stem: str, suffix: str, text: str) -> Path:
    """Write ``text`` to a new ``directory/<stem><suffix>`` (``<stem>-2<suffix>`` ... when
    taken) and return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    n = 1
    while True:
        candidate = directory / (f"{stem}{suffix}" if n == 1 else f"{stem}-{n}{suffix}")
        try:
            with candidate.open("x", encoding="utf-8") as handle:
                handle.write(text)
        except FileExistsError:
            n += 1
            continue
        return candidate

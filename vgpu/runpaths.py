"""Where vgpu keeps things on this machine: its cache folder, what it must remember
between runs (``state_dir``), and names for per-run folders and files that never collide:
two runs started within the same second (or at once from two processes) each get their
own, because the name is claimed with an atomic create rather than checked and then
written."""

from __future__ import annotations

import os
import time
from pathlib import Path


def cache_dir() -> Path:
    """vgpu's cache on this machine (built simulator binaries, generated data sets):
    $VGPU_CACHE_DIR, else $XDG_CACHE_HOME/vgpu, else ~/.cache/vgpu."""
    if env := os.environ.get("VGPU_CACHE_DIR"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vgpu"


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

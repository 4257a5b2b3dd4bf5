"""Where a scenario file came from: its git revision, when it lives in a git work tree."""

from __future__ import annotations

import subprocess
from pathlib import Path


def scenario_revision(path: str | None) -> str | None:
    """``<commit>`` of the last commit that touched the file, with ``+modified`` when the
    work tree differs from it; None outside git or for an untracked file."""
    if path is None:
        return None
    file = Path(path).resolve()
    if not file.exists():
        return None

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=file.parent, capture_output=True,
                                  text=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("log", "-1", "--format=%H", "--", file.name)
    if not commit:
        return None
    dirty = git("status", "--porcelain", "--", file.name)
    return f"{commit}+modified" if dirty else commit

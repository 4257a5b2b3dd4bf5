"""Per-run folders and files: a second run in the same second never reuses the first's."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from vgpu.runpaths import new_run_dir, new_run_file


def test_run_dirs_within_one_second_are_distinct(tmp_path: Path) -> None:
    with ThreadPoolExecutor(8) as pool:
        dirs = list(pool.map(lambda _: new_run_dir(tmp_path / "logs", "s6"), range(20)))
    assert len(set(dirs)) == 20
    assert all(d.is_dir() and d.parent == tmp_path / "logs" for d in dirs)
    assert all(d.name.startswith("s6-") for d in dirs)


def test_run_files_keep_every_text(tmp_path: Path) -> None:
    paths = [new_run_file(tmp_path, "preflight-x", ".json", f"{i}\n") for i in range(3)]
    assert [p.name for p in paths] == ["preflight-x.json", "preflight-x-2.json",
                                       "preflight-x-3.json"]
    assert [p.read_text() for p in paths] == ["0\n", "1\n", "2\n"]

"""A corpus of broken scenario and inventory files: each must exit 2 with a message that
names the file, the line, the field and what would be valid. The first line of each file
says what is expected (`# expect: ...`); a leading ':' means 'file:line' must precede it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.invoke import MAX_REFUSAL_PEAK_BYTES, run_cli, run_cli_traced

FIXTURES = Path(__file__).parent / "fixtures"
BROKEN = sorted((Path(__file__).parent / "broken").glob("*.yaml"))


def _arguments(path: Path) -> tuple[str, list[str]]:
    """What the file expects, and the CLI arguments that load it."""
    lines = path.read_text().splitlines()
    expect = lines[0].removeprefix("# expect: ")
    if "# kind: inventory" in lines[:3]:
        return expect, ["plan", "--scenario", "8", "--inventory", str(path)]
    for line in lines[:3]:
        if line.startswith("# inventory: "):
            inventory = FIXTURES / line.removeprefix("# inventory: ")
            return expect, ["plan", str(path), "--inventory", str(inventory)]
    return expect, ["plan", str(path)]


def test_corpus_is_large_enough() -> None:
    assert len(BROKEN) >= 20


def _files(*roots: Path) -> set[tuple[Path, float]]:
    return {(p, p.stat().st_mtime) for root in roots for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("path", BROKEN, ids=[p.stem for p in BROKEN])
def test_broken_file_exits_2_naming_the_field(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expect, args = _arguments(path)
    monkeypatch.chdir(tmp_path)
    before = _files(tmp_path, path.parent)
    code, out, err, peak = run_cli_traced(args)
    assert code == 2, (out, err)
    text = " ".join(err.split())
    wanted = f"{path}{expect}" if expect.startswith(":") else expect
    assert wanted in text, text
    assert "Traceback" not in err
    assert peak < MAX_REFUSAL_PEAK_BYTES, f"allocated {peak / 1e6:.0f} MB at peak"
    assert _files(tmp_path, path.parent) == before, "a broken file must not write anything"


def test_real_process_exit_code_and_stderr() -> None:
    path = Path(__file__).parent / "broken" / "bad_profile.yaml"
    proc = subprocess.run([sys.executable, "-m", "vgpu", "plan", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert f"{path}:9 vms[1].vgpus[0]: '5g.50gb' is not a MIG profile" in proc.stderr


def test_all_problems_reported_at_once(tmp_path: Path) -> None:
    bad = tmp_path / "two.yaml"
    bad.write_text("id: x\nname: y\ngpu: A100-80GB\nvms: [{name: a, vgpus: [9g.1gb]},"
                   " {name: b, vgpus: [8g.1gb]}]\nworkloads: [{model: resnet50}]\n")
    code, _, err = run_cli(["plan", str(bad)])
    assert code == 2
    assert "vms[0].vgpus[0]: '9g.1gb'" in err and "vms[1].vgpus[0]: '8g.1gb'" in err

"""The campaign's pure parts: the file's checks (file, field, fix, nothing run), the
gate's reduction of a host's verdicts, and the state file round trip."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.cli.invoke import run_cli
from vgpu.campaign import state as saved
from vgpu.campaign.gate import gate_verdict, row_verdict
from vgpu.campaign.model import load_campaign
from vgpu.errors import InputError

GOOD = {"name": "r1", "hosts": ["H0", "H1"], "scenarios": ["5"],
        "upgrade": {"method": "sim", "faults": {"H1": {"slowdown_pct": 10}}}}


def _write(tmp_path: Path, data: dict[str, object]) -> Path:
    path = tmp_path / "campaign.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_good_file_loads_with_its_defaults(tmp_path: Path) -> None:
    campaign = load_campaign(_write(tmp_path, GOOD))
    assert campaign.baseline == "pre-upgrade" and campaign.baseline_series == 3
    assert campaign.upgrade.faults["H1"].slowdown_pct == 10
    assert campaign.gate_on_bare_metal is False and campaign.tolerance_pct is None


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"hosts": ["H0", "H0"]}, "hosts", "listed twice"),
    ({"hosts": []}, "hosts", "at least 1"),
    ({"name": "a b"}, "name", "not a campaign name"),
    ({"upgrade": {"method": "command"}}, "upgrade", "needs 'command'"),
    ({"upgrade": {"method": "manual", "command": "x"}}, "upgrade", "for method command"),
    ({"upgrade": {"method": "sim", "faults": {"H9": {}}}}, "(file)", "H9 not in hosts"),
    ({"upgrade": {"method": "ansible"}}, "upgrade.method", "'manual', 'command' or 'sim'"),
    ({"tolerance_pct": 0}, "tolerance_pct", "greater than 0"),
    ({"hostz": ["H0"]}, "hostz", "did you mean 'hosts'"),
])
def test_a_bad_file_names_file_field_and_fix(tmp_path: Path, change: dict[str, object],
                                            field: str, words: str) -> None:
    path = _write(tmp_path, {**GOOD, **change})
    with pytest.raises(InputError) as refused:
        load_campaign(path)
    text = str(refused.value)
    assert str(path) in text and words in text, text
    assert field in text or field == "(file)"


def test_the_cli_refuses_a_bad_file_with_exit_2_and_writes_nothing(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch
                                                                   ) -> None:
    monkeypatch.chdir(tmp_path)
    path = _write(tmp_path, {**GOOD, "hosts": ["H0", "H0"]})
    code, _out, err = run_cli(["campaign", "run", str(path)])
    assert code == 2 and "listed twice" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["campaign.yaml"]
    code, _out, err = run_cli(["campaign", "status", str(tmp_path / "missing.yaml")])
    assert code == 2 and "no such campaign file" in err


def _row(baseline: str | None, bare: str | None = None, accuracy: str | None = None,
         diff: float = -1.0) -> dict[str, object]:
    return {"scenario": "5", "workload": "resnet50-offline",
            "vs_baseline": {"verdict": baseline, "difference_pct": diff} if baseline else None,
            "vs_bare_metal": {"verdict": bare} if bare else None, "accuracy": accuracy}


def test_a_host_is_gated_on_its_own_baseline_and_never_on_bare_metal_alone() -> None:
    assert row_verdict(_row("PASS", bare="INCONCLUSIVE"), on_bare_metal=False) == "PASS"
    assert row_verdict(_row("PASS", bare="INCONCLUSIVE"), on_bare_metal=True) == \
        "INCONCLUSIVE"
    assert row_verdict(_row(None, bare="PASS"), on_bare_metal=True) is None
    assert row_verdict(_row(None, bare="FAIL"), on_bare_metal=True) == "FAIL"
    assert row_verdict(_row("PASS", accuracy="FAIL"), on_bare_metal=False) == "FAIL"
    verdict, why = gate_verdict([_row("PASS"), _row("FAIL", diff=-11.3)], False)
    assert verdict == "FAIL" and "(-11.3%)" in why
    verdict, why = gate_verdict([_row("PASS"), _row("INCONCLUSIVE")], False)
    assert verdict == "INCONCLUSIVE" and "more runs decide it" in why
    disturbed = _row("INCONCLUSIVE")
    disturbed["vs_baseline"]["why"] = ["disturbed: other processes used 48% of the CPU"]  # type: ignore[index]
    assert gate_verdict([disturbed], False)[1].endswith("other processes used 48% of the CPU")
    assert gate_verdict([], False)[0] is None
    assert gate_verdict([_row(None, bare="PASS")], False)[0] is None


def test_a_rerun_judges_the_host_with_a_new_revalidation_a_resume_with_the_same() -> None:
    host = saved.HostProgress("H0")
    assert host.revalidation_name("r1", capture=True) == "campaign-r1-H0-capture"
    assert host.revalidation_name("r1", capture=False) == "campaign-r1-H0-after"
    host.reruns = 2
    assert host.revalidation_name("r1", capture=False) == "campaign-r1-H0-after2"
    assert host.revalidation_name("r1", capture=True) == "campaign-r1-H0-capture"


def test_the_state_survives_its_file_and_a_broken_one_is_named(tmp_path: Path) -> None:
    state = saved.new_state(tmp_path, "r1", tmp_path / "c.yaml", ["H0", "H1"])
    host = state.host("H0")
    state.begin(host, "drain")
    again = saved.load(tmp_path, "r1")
    assert again is not None and again.host("H0").current == "baseline"
    assert again.host("H0").phase("drain").status == saved.STARTED
    state.begin(again.host("H0"), "drain")  # a phase found started is run again, noted
    assert state.events and "drain: resumed after an interruption" in state.events[-1]
    saved.path_for(tmp_path, "r1").write_text("{not json")
    with pytest.raises(InputError) as refused:
        saved.load(tmp_path, "r1")
    assert "campaign-r1.json" in str(refused.value) and "delete it" in str(refused.value)

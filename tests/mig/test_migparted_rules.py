"""mig-parted's own format rules, as vgpu's reader applies them: the file-level and
entry-level cases NVIDIA mig-parted accepts and refuses (its `assert --valid-config`),
then what mig-parted does not check and vgpu refuses at load with file:line: a profile
that cannot exist on the GPU and a device filter that matches no GPU of the scenario.
vgpu's writer produces only files these rules accept."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.cli.invoke import run_cli
from vgpu import mig
from vgpu.errors import InputError, Problem
from vgpu.mig.migparted import ConfigProblem, GpuLayout, read_layouts, render
from vgpu.model.load import read_config

GPU = mig.gpu_model("A100-80GB")
A100_80GB_PCIE = "0x20B510DE"  # PCI device 0x20B5, vendor NVIDIA 0x10DE


def _read(tmp_path: Path, text: str, config: str = "c", gpus: int = 2) -> list[GpuLayout]:
    path = tmp_path / "parted.yaml"
    path.write_text(text)
    return read_config(path, config, GPU, gpus_for_all=gpus)


def _problems(tmp_path: Path, text: str, config: str = "c") -> list[Problem]:
    with pytest.raises(InputError) as raised:
        _read(tmp_path, text, config)
    return raised.value.problems


def _file(body: str) -> str:
    return f"version: v1\nmig-configs:\n  c:\n{body}"


def test_the_rules_read_a_parsed_document_and_name_each_problem_by_its_place() -> None:
    data = {"version": "v1", "mig-configs": {"c": [
        {"devices": [0], "mig-enabled": True, "mig-devices": {"4g.40gb": 2}},
        {"devices": [1], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]}}
    layouts, problems = read_layouts(data, "c", GPU)
    assert layouts == [GpuLayout(0, True, ("4g.40gb", "4g.40gb")),
                       GpuLayout(1, True, ("1g.10gb",) * 7)]
    [problem] = problems  # a second 4g.40gb finds no free start
    assert problem.where == ("mig-configs", "c", 0, "mig-devices")
    assert "does not fit one A100-80GB" in problem.message
    data["mig-configs"]["c"][0]["mig-devices"] = {"4g.40gb": 1}
    assert read_layouts(data, "c", GPU)[1] == []
    assert read_layouts({"version": "v2"}, "c", GPU)[1][0] == ConfigProblem(
        ("version",), "version is 'v2'; vgpu reads mig-parted version v1", "set version: v1")


# --- the file (mig-parted's Spec rules) -------------------------------------------------

@pytest.mark.parametrize(("text", "field", "message"), [
    ('version: v2\nmig-configs:\n  c:\n    - {devices: all, "mig-enabled": false}\n',
     "version", "version is 'v2'"),
    ('mig-configs:\n  c:\n    - {devices: all, "mig-enabled": false}\n',
     "version", "version is None"),
    ('bogus: field\nversion: v1\nmig-configs:\n  c:\n    - {devices: all, '
     '"mig-enabled": false}\n', "bogus", "unknown key 'bogus'"),
    ("version: v1\nmig-configs: {}\n", "mig-configs", "with at least one config"),
    ("version: v1\n", "mig-configs", "with at least one config"),
    ('version: v1\nmig-configs:\n  c:\n    - {devices: all, "mig-enabled": false}\n'
     "  empty: []\n", "mig-configs.empty", "config 'empty' is not a non-empty list"),
])
def test_file_level_rules_refuse(tmp_path: Path, text: str, field: str,
                                 message: str) -> None:
    problems = _problems(tmp_path, text)
    assert any(p.field == field and message in p.message for p in problems), problems
    assert all(p.file == str(tmp_path / "parted.yaml") for p in problems)


# --- one entry (mig-parted's MigConfigSpec rules) ---------------------------------------

ACCEPTED = {
    "well formed": '    - {devices: all, mig-enabled: true, mig-devices: {"1g.10gb": 2}}\n',
    "with a filter": f'    - {{device-filter: "{A100_80GB_PCIE}", devices: all, '
                     'mig-enabled: true, mig-devices: {"1g.10gb": 2}}\n',
    "with a list of filters": f'    - {{device-filter: ["0x20B010DE", "{A100_80GB_PCIE}"], '
                              'devices: all, mig-enabled: true, mig-devices: {"1g.10gb": 2}}\n',
    "no mig-devices, disabled": "    - {devices: all, mig-enabled: false}\n",
    "empty mig-devices, enabled": "    - {devices: all, mig-enabled: true, mig-devices: {}}\n",
    "devices a list": "    - {devices: [0, 1], mig-enabled: false}\n",
}


@pytest.mark.parametrize("body", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_entries_mig_parted_accepts_are_read(tmp_path: Path, body: str) -> None:
    layouts = _read(tmp_path, _file(body))
    assert [g.index for g in layouts] == [0, 1]


REFUSED = {
    "missing devices": ('    - {mig-enabled: true, mig-devices: {"1g.10gb": 2}}\n',
                        "mig-configs.c[0]", "devices is missing"),
    "missing mig-enabled": ('    - {devices: all, mig-devices: {"1g.10gb": 2}}\n',
                            "mig-configs.c[0]", "mig-enabled must be true or false"),
    "missing mig-devices, enabled": ("    - {devices: all, mig-enabled: true}\n",
                                     "mig-configs.c[0]", "mig-devices is missing"),
    "mig-devices, disabled": ('    - {devices: all, mig-enabled: false, mig-devices: '
                              '{"1g.10gb": 2}}\n', "mig-configs.c[0].mig-devices",
                              "mig-devices on a GPU with mig-enabled: false"),
    "mig-devices formatted incorrectly": (
        "    - {devices: all, mig-enabled: true, mig-devices: {bogus: 2}}\n",
        "mig-configs.c[0].mig-devices.bogus", "'bogus' is not a MIG device"),
    "unknown key": ("    - {bogus: field, devices: all, mig-enabled: false}\n",
                    "mig-configs.c[0].bogus", "unknown key 'bogus'"),
    "devices a string other than all": ("    - {devices: bogus, mig-enabled: false}\n",
                                        "mig-configs.c[0].devices", "neither 'all' nor"),
    "devices a mapping": ("    - {devices: {}, mig-enabled: false}\n",
                          "mig-configs.c[0].devices", "neither 'all' nor"),
    "devices one int, not a list": ("    - {devices: 0, mig-enabled: false}\n",
                                    "mig-configs.c[0].devices", "neither 'all' nor"),
    "mig-enabled not a bool": ("    - {devices: all, mig-enabled: yes-please}\n",
                               "mig-configs.c[0].mig-enabled", "must be true or false"),
    "device-filter a mapping": ("    - {device-filter: {a: 1}, devices: all, "
                                "mig-enabled: false}\n", "mig-configs.c[0].device-filter",
                                "neither a PCI device id nor a list"),
}


@pytest.mark.parametrize(("body", "field", "message"), REFUSED.values(), ids=REFUSED.keys())
def test_entries_mig_parted_refuses_are_refused_at_their_line(
    tmp_path: Path, body: str, field: str, message: str,
) -> None:
    problems = _problems(tmp_path, _file(body))
    assert any(p.field == field and message in p.message and p.line == 4
               for p in problems), problems


def test_a_bad_entry_in_another_config_is_refused_as_mig_parted_would(
    tmp_path: Path,
) -> None:
    text = _file("    - {devices: all, mig-enabled: false}\n") + \
        "  other:\n    - {devices: all, mig-enabled: true}\n"
    [problem] = _problems(tmp_path, text)
    assert problem.field == "mig-configs.other[0]" and problem.line == 6
    assert "mig-devices is missing" in problem.message


# --- what mig-parted does not check -------------------------------------------------------

def test_a_profile_that_cannot_exist_on_the_gpu_is_refused(tmp_path: Path) -> None:
    # "0g.0gb" and "1g.5gb" are in mig-parted's format; neither exists on an A100-80GB
    text = _file('    - {devices: all, mig-enabled: true, mig-devices: '
                 '{"0g.0gb": 100, "1g.5gb": 1}}\n')
    problems = _problems(tmp_path, text)
    assert [(p.field, p.line) for p in problems] == [
        ("mig-configs.c[0].mig-devices.0g.0gb", 4), ("mig-configs.c[0].mig-devices.1g.5gb", 4)]
    assert "'1g.5gb' is not a MIG profile of A100-80GB; it cannot exist on this GPU" \
        in problems[1].message
    assert problems[1].fix is not None and "1g.10gb" in problems[1].fix


@pytest.mark.parametrize("value", ['"A100-SXM4-40GB"', '"0x20B010DE"', '["0x233010DE"]',
                                   '"0x20B51234"'])
def test_a_device_filter_that_matches_no_gpu_is_refused_at_its_line(
    tmp_path: Path, value: str,
) -> None:
    text = _file(f"    - devices: all\n      device-filter: {value}\n"
                 "      mig-enabled: false\n")
    [problem] = _problems(tmp_path, text)
    assert problem.field == "mig-configs.c[0].device-filter" and problem.line == 5
    assert "matches no A100-80GB (PCI device ids 0x20B210DE, 0x20B510DE" in problem.message
    assert str(problem).startswith(f"{tmp_path / 'parted.yaml'}:5 ")


def test_device_filter_refusal_reaches_the_cli_with_file_line_and_exit_2(
    tmp_path: Path,
) -> None:
    (tmp_path / "parted.yaml").write_text(_file(
        '    - {devices: all, device-filter: "0x20B010DE", mig-enabled: false}\n'))
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text("id: mp1\nname: from mig-parted\nplatform: bare-metal\n"
                        "gpu: A100-80GB\nmig_parted: {file: parted.yaml, config: c}\n"
                        "workloads: [{model: resnet50}]\n")
    code, out, err = run_cli(["plan", str(scenario)])
    assert code == 2 and out == ""
    assert f"{tmp_path / 'parted.yaml'}:4 mig-configs.c[0].device-filter: device-filter " \
        "'0x20B010DE' matches no A100-80GB" in " ".join(err.split())


# --- the writer -------------------------------------------------------------------------

def test_what_vgpu_writes_follows_mig_parteds_rules_and_reads_back(tmp_path: Path) -> None:
    layouts = [GpuLayout(0, True, ("3g.40gb", "2g.20gb", "1g.10gb")), GpuLayout(1, False),
               GpuLayout(2, True, ())]
    text = render({"c": layouts}, GPU, ["written by vgpu"])
    data = yaml.safe_load(text)
    assert set(data) == {"version", "mig-configs"} and data["version"] == "v1"
    for entry in data["mig-configs"]["c"]:
        assert set(entry) <= {"devices", "mig-enabled", "mig-devices"}
        assert isinstance(entry["devices"], list)
        assert ("mig-devices" in entry) is entry["mig-enabled"]
    assert _read(tmp_path, text, gpus=3) == layouts

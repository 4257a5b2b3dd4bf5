"""Scenario and inventory files that are not what they claim to be (binary data, another
encoding, NUL or control characters, megabytes, floods of typos, deep nesting, alias
bombs): each ends quickly in exit 2 with the file, line and a fix, and writes nothing."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.cli.invoke import MAX_REFUSAL_PEAK_BYTES, run_cli, run_cli_traced
from vgpu.errors import MAX_LISTED_PROBLEMS, InputError, Problem
from vgpu.model import load_inventory, load_scenario, yamlsource
from vgpu.model.yamlcompose import MAX_DEPTH, MAX_VALUES

BROKEN = Path(__file__).parent / "broken"
REPO = Path(__file__).parents[2]
SCENARIO_HEAD = ("id: h1\nname: hostile\ngpu: A100-80GB\nvms: [{name: vm1, vgpus: [1g.10gb]}]\n"
                 "workloads: [{model: resnet50}]\n")
INVENTORY_HEAD = ("name: hostile\nvcenter: {host: vc, user: u, password: {env: X}}\n"
                  "placement: {datacenter: DC, datastore: DS, network: N, template: t}\n")
KINDS = ["scenario", "inventory"]


@dataclass
class Outcome:
    path: Path
    text: str
    peak_bytes: int
    err: str


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, content: bytes) -> Outcome:
    """Write ``content`` as a scenario or inventory, run `vgpu plan` on it from an empty
    folder and check what every hostile file must give: exit 2, no traceback, no file
    written, little memory allocated (the bound on its work; tests/cli/invoke.py)."""
    path = tmp_path / "in" / f"hostile-{kind}.yaml"
    path.parent.mkdir()
    path.write_bytes(content)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    args = (["plan", str(path)] if kind == "scenario"
            else ["plan", "--scenario", "8", "--inventory", str(path)])
    code, out, err, peak = run_cli_traced(args)
    assert code == 2, (out, err)
    assert "Traceback" not in err and out == ""
    assert sorted(tmp_path.rglob("*")) == [path.parent, path, work]
    assert peak < MAX_REFUSAL_PEAK_BYTES, f"allocated {peak / 1e6:.0f} MB at peak"
    return Outcome(path, " ".join(err.split()), peak, err)


def _head(kind: str) -> bytes:
    return (SCENARIO_HEAD if kind == "scenario" else INVENTORY_HEAD).encode()


@pytest.mark.parametrize("kind", KINDS)
def test_binary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8
    got = _run(tmp_path, monkeypatch, kind, png)
    assert f"{got.path}:3: contains a NUL byte at line 3 (fix: this does not look like a " \
           "YAML text file" in got.text


@pytest.mark.parametrize("kind", KINDS)
def test_non_utf8_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    content = _head(kind) + "description: café crème\n".encode("latin-1")
    got = _run(tmp_path, monkeypatch, kind, content)
    byte = content.index(b"\xe9")
    line = content.count(b"\n", 0, byte) + 1
    assert f"{got.path}:{line}: not UTF-8 text at byte {byte} (0xe9) (fix: save the file " \
           "as UTF-8" in got.text


@pytest.mark.parametrize("kind", KINDS)
def test_nul_byte(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    content = _head(kind) + b"description: a\x00b\n"
    got = _run(tmp_path, monkeypatch, kind, content)
    line = content.count(b"\n")
    assert f"{got.path}:{line}: contains a NUL byte at line {line}" in got.text


@pytest.mark.parametrize("kind", KINDS)
def test_control_character(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    content = _head(kind) + b"description: bell\x07\n"
    got = _run(tmp_path, monkeypatch, kind, content)
    line = content.count(b"\n")
    assert f"{got.path}:{line}: contains the control character U+0007 at line {line}" \
        in got.text


@pytest.mark.parametrize("kind", KINDS)
def test_deep_nesting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    content = _head(kind) + b"description: " + b"[" * 10_000 + b"\n"
    got = _run(tmp_path, monkeypatch, kind, content)
    line = content.count(b"\n")
    assert f"{got.path}:{line} description: nested deeper than {MAX_DEPTH} levels" in got.text


@pytest.mark.parametrize("kind", KINDS)
def test_deep_block_nesting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                            kind: str) -> None:
    nested = "".join(f"{'  ' * i}  k{i}:\n" for i in range(200))
    content = _head(kind) + b"description:\n" + nested.encode()
    got = _run(tmp_path, monkeypatch, kind, content)
    line = _head(kind).count(b"\n") + 1 + MAX_DEPTH
    assert f"{got.path}:{line} description: nested deeper than {MAX_DEPTH} levels" in got.text


@pytest.mark.parametrize("kind", KINDS)
def test_alias_bomb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    lines = ['lol0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"lol{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 10)]
    bomb = "\n".join(lines).encode() + b"\n"
    assert len(bomb) < 1100
    content = _head(kind) + bomb
    got = _run(tmp_path, monkeypatch, kind, content)
    line = content.count(b"\n", 0, content.index(b"*l0")) + 1
    assert f"{got.path}:{line} lol1[0]: uses the YAML alias '*l0'; vgpu refuses aliases" \
        in got.text
    assert "(fix: write the value out in full" in got.text


@pytest.mark.parametrize("kind", KINDS)
def test_merge_key_alias_is_refused_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        kind: str) -> None:
    content = _head(kind) + b"base: &base {a: 1}\nother:\n  <<: *base\n"
    got = _run(tmp_path, monkeypatch, kind, content)
    line = content.count(b"\n")
    assert f"{got.path}:{line} other.<<: uses the YAML alias '*base'" in got.text


@pytest.mark.parametrize("kind", KINDS)
def test_file_over_the_size_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                kind: str) -> None:
    content = _head(kind) + b"".join(b"unknown_%d: 1\n" % i for i in range(400_000))
    assert len(content) > 5_000_000
    got = _run(tmp_path, monkeypatch, kind, content)
    assert f"{got.path}: the file is {len(content):,} bytes; vgpu reads scenario and " \
           f"inventory files of up to {yamlsource.MAX_FILE_BYTES:,} bytes (1 MiB)" in got.text


@pytest.mark.parametrize("kind", KINDS)
def test_too_many_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    content = _head(kind) + b"description:\n" + b"- 0\n" * (MAX_VALUES + 10)
    assert len(content) < yamlsource.MAX_FILE_BYTES
    got = _run(tmp_path, monkeypatch, kind, content)
    assert f"{got.path}:" in got.text
    assert f"holds more than {MAX_VALUES:,} keys and values" in got.text


@pytest.mark.parametrize("kind", KINDS)
def test_flood_of_unknown_keys_lists_the_first_problems(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    keys = 8_000
    content = _head(kind) + b"".join(b"unknown_%d: 1\n" % i for i in range(keys))
    got = _run(tmp_path, monkeypatch, kind, content)
    first = _head(kind).count(b"\n") + 1
    assert f"{got.path}:{first} unknown_0: unknown key 'unknown_0'" in got.text
    listed = [line for line in got.err.splitlines() if "unknown key" in line]
    assert len(listed) == MAX_LISTED_PROBLEMS
    assert f"... and {keys - MAX_LISTED_PROBLEMS:,} more problems" in got.text
    assert len(got.err) < 30_000


def test_unclosed_quote_is_reported_where_it_opens(tmp_path: Path) -> None:
    text = "id: q\nname: \"never closed\n" + "".join(f"key{i}: v\n" for i in range(25))
    assert text.count("\n") == 27
    path = tmp_path / "quote.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as caught:
        load_scenario(path)
    [problem] = caught.value.problems
    assert problem.line == 2
    assert problem.message.startswith("not valid YAML: a quoted scalar starts here and is "
                                      "never closed")


def test_other_syntax_errors_keep_their_own_line(tmp_path: Path) -> None:
    path = tmp_path / "indent.yaml"
    path.write_text("id: q\nvms:\n  - name: vm1\n   vgpus: [1g.10gb]\nname: x\n")
    with pytest.raises(InputError) as caught:
        load_scenario(path)
    assert caught.value.problems[0].line == 4


@pytest.mark.parametrize("name", ["deep_nesting", "alias_bomb", "unclosed_quote",
                                  "unclosed_bracket", "two_documents", "complex_key"])
def test_pure_python_parser_gives_the_same_answers(name: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Without libyaml (yaml's pure-Python parser), the answers are the same."""
    path = BROKEN / f"{name}.yaml"
    expect = path.read_text().splitlines()[0].removeprefix("# expect: ")
    for loader in (yaml.SafeLoader, getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
        monkeypatch.setattr(yamlsource, "_LOADER", loader)
        with pytest.raises(InputError) as caught:
            load_scenario(path)
        assert f"{path}{expect}" in " ".join(str(caught.value).split())


@pytest.mark.parametrize("parser_limit", [10, 40, None])
def test_the_parsers_own_depth_limit_is_answered_as_vgpus(
        parser_limit: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A parser that stops deep nesting itself (libyaml in PyYAML >= 6.0.3, before vgpu's
    composer sees the events) gets the same answer as vgpu's own MAX_DEPTH check, whatever
    depth it stops at: the same file, line, field and fix."""
    text = SCENARIO_HEAD + "description: " + "[" * 500 + "\n"
    monkeypatch.setattr(yamlsource, "_LOADER", yaml.SafeLoader)
    with pytest.raises(InputError) as own:
        yamlsource.parse_yaml(text, "deep.yaml")
    real_parse = yaml.parse

    def limited(stream: str, Loader: type) -> object:
        depth = 0
        for event in real_parse(stream, Loader=Loader):
            depth += isinstance(event, yaml.CollectionStartEvent)
            if parser_limit is not None and depth > parser_limit:
                mark = event.start_mark
                raise yaml.parser.ParserError(None, None, "exceeded maximum nesting depth",
                                              mark)
            yield event

    if parser_limit is None:  # the installed libyaml, whatever its limit
        monkeypatch.setattr(yamlsource, "_LOADER", getattr(yaml, "CSafeLoader",
                                                           yaml.SafeLoader))
    else:
        monkeypatch.setattr(yaml, "parse", limited)
    with pytest.raises(InputError) as parsers:
        yamlsource.parse_yaml(text, "deep.yaml")
    assert str(parsers.value) == str(own.value)
    assert f"deep.yaml:6 description: nested deeper than {MAX_DEPTH} levels" in " ".join(
        str(own.value).split())


def test_recursion_error_is_a_last_resort_input_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def recurse(self: object, events: object) -> None:
        raise RecursionError

    monkeypatch.setattr(yamlsource.Composer, "compose", recurse)
    with pytest.raises(InputError, match=f"x.yaml: nested deeper than {MAX_DEPTH} levels"):
        yamlsource.parse_yaml("a: 1\n", "x.yaml")


def test_text_given_as_a_string_is_checked_too() -> None:
    with pytest.raises(InputError, match=r"x.yaml:2: contains a NUL byte at line 2"):
        yamlsource.parse_yaml("a: 1\nb: \x00\n", "x.yaml")
    with pytest.raises(InputError, match="the file is"):
        yamlsource.parse_yaml("#" * (yamlsource.MAX_FILE_BYTES + 1), "x.yaml")


def test_a_folder_is_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read file"):
        load_inventory(tmp_path)


def test_an_inventory_folder_is_named_as_a_folder_not_as_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = tmp_path / "lab"
    folder.mkdir()
    (folder / "lab.yaml").write_text(INVENTORY_HEAD)
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(["plan", "--scenario", "8", "--inventory", str(folder)])
    text = " ".join(err.split())
    assert code == 2 and out == ""
    assert f"--inventory: inventory {folder} is a folder, not a file" in text
    assert "does not exist" not in text
    assert "fix: give the inventory YAML file itself (this folder has: lab.yaml)" in text
    assert sorted(tmp_path.rglob("*")) == [folder, folder / "lab.yaml"]


def test_vsphere_apply_on_a_bare_metal_inventory_names_the_missing_vcenter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Not the plan's "no host has a A100-80GB GPU": the hosts are not what is wrong."""
    path = tmp_path / "bm.yaml"
    path.write_text("name: bm\nbare_metal: [{name: gpu01, address: 10.0.0.5, "
                    "gpus: [{model: A100-80GB, count: 4}]}]\n")
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(["apply", "--scenario", "8", "--inventory", str(path),
                              "--no-provision", "--yes"])
    text = " ".join(err.split())
    assert code == 2 and "Traceback" not in err
    assert (f"{path} vcenter: scenario 8 creates vSphere VMs, and the inventory names no "
            "vCenter (it lists only bare-metal hosts: gpu01)") in text
    assert "fix: add vcenter (host, user, password) and placement" in text
    assert "no host has" not in text
    assert sorted(tmp_path.rglob("*")) == [path]


def test_yaml_values_still_read_as_before(tmp_path: Path) -> None:
    path = tmp_path / "values.yaml"
    path.write_text("a: 1\nb: 2.5\nc: true\nd: null\ne: '7'\nf: 2024-01-02\ng: [x, {h: i}]\n"
                    "&anchor j: k\nl: !!str 3\n")
    doc = yamlsource.load_yaml(path)
    assert doc.data == {"a": 1, "b": 2.5, "c": True, "d": None, "e": "7",
                        "f": datetime.date(2024, 1, 2), "g": ["x", {"h": "i"}],
                        "j": "k", "l": "3"}
    assert doc.line_of(("g", 1, "h")) == 7 and doc.line_of(("j",)) == 8


def test_problem_listing_is_capped_once_in_input_error() -> None:
    problems = [Problem("f.yaml", f"k{i}", "unknown key", line=i + 1) for i in range(120)]
    text = str(InputError(problems, unlisted=30))
    lines = text.splitlines()
    assert len(lines) == MAX_LISTED_PROBLEMS + 1
    assert lines[-1] == "... and 100 more problems (fix those above first)"
    assert str(InputError(problems[:MAX_LISTED_PROBLEMS])).count("\n") == MAX_LISTED_PROBLEMS - 1
    assert str(InputError(problems[:MAX_LISTED_PROBLEMS + 1])).endswith("and 1 more problem "
                                                                        "(fix those above first)")


def test_shipped_inventories_and_scenarios_follow_the_name_rule() -> None:
    for path in sorted((REPO / "inventory").glob("*.yaml")):
        load_inventory(path)
    for path in sorted((REPO / "scenarios").glob("*.yaml")):
        load_scenario(path)


def test_a_lab_name_outside_the_name_rule_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text(INVENTORY_HEAD + "lab: team b/rack 3\n")
    with pytest.raises(InputError, match=r"inv.yaml:4 lab: .*contains ' '"):
        load_inventory(path)

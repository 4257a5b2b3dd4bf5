"""Domain errors name a parameter and a reason, never a flag; the command line layer names
its flag and words the fix with it (vgpu.cli.common.flag_names)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vgpu.cli.common import flag_names
from vgpu.errors import InputError, ParameterError
from vgpu.vsphere.preflight.saved import NONE_SAVED, SAVED_RUN, find_saved


def test_the_command_names_its_flag_and_words_the_fix_with_the_errors_details() -> None:
    error = ParameterError("GPU index", "this machine has no GPU 3", "pick another",
                           reason="absent", details={"gpu": 3})
    with pytest.raises(InputError) as named, \
            flag_names({"GPU index": "--gpu"}, {"absent": "pass --gpu {gpu} no more"}):
        raise error
    assert type(named.value) is InputError and named.value.exit_code == 2
    assert str(named.value) == "command line --gpu: this machine has no GPU 3 (fix: pass " \
        "--gpu 3 no more)"
    # Without a command's fix the domain's stays; an unmapped parameter stays as it was.
    assert str(error.named({"GPU index": "--gpu"}, {})) == \
        "command line --gpu: this machine has no GPU 3 (fix: pick another)"
    assert error.named({"host": "--host"}, {}) is error
    assert str(error) == "command line GPU index: this machine has no GPU 3 (fix: pick another)"


def test_a_saved_run_missing_is_told_in_the_domains_terms(tmp_path: Path) -> None:
    with pytest.raises(ParameterError) as missing:
        find_saved("last", tmp_path, tmp_path / "inv.yaml")
    assert (missing.value.parameter, missing.value.reason) == (SAVED_RUN, NONE_SAVED)
    assert "--" not in str(missing.value)  # revalidate asks too, and has no --against
    with pytest.raises(ParameterError) as unknown:
        find_saved("preflight-nope", tmp_path, tmp_path / "inv.yaml")
    assert "'preflight-nope' is neither a file nor a run id" in str(unknown.value)
    assert "--" not in str(unknown.value)

"""When vgpu launches mpirun again (pure: each launch's outcome is given, nothing runs): a
launch whose daemons did not start is made again after a pause, up to three in all; a
launch whose ranks failed, or that failed for another reason, is not; the record and the
error say how many launches were made."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from vgpu.errors import RemoteError
from vgpu.remote.local import LocalTransport
from vgpu.train import mpirun
from vgpu.train.launch import TrainNode
from vgpu.train.mpirun import MpiJob, run_mpi_job


@dataclass(frozen=True)
class Shell:
    exit_code: int
    stdout: str = ""
    stderr: str = ""


NO_DAEMON = Shell(213, stderr="ORTE ... set the MCA param routed=direct on the command line")
RECORD = Shell(0, stdout=json.dumps({"status": "ok", "world_size": 2}))
NOTHING = Shell(1)


def _job() -> MpiJob:
    node = TrainNode(name="n1", shell=LocalTransport(), address="10.0.0.1", workdir="/w")
    return MpiJob(nodes=[node], ranks_per_node=2, command="mpiprobe", spec={},
                  threads_per_rank=1)


def _launches(monkeypatch: pytest.MonkeyPatch,
              outcomes: list[tuple[Shell, Shell, str]]) -> tuple[list[float], list[int]]:
    """Each launch returns the next (mpirun, read of rank 0's record, rank failures)."""
    pauses: list[float] = []
    made: list[int] = []

    def attempt(job: MpiJob, as_root: bool) -> tuple[Shell, Shell, str]:
        made.append(1)
        return outcomes[len(made) - 1]

    monkeypatch.setattr(mpirun, "stage_job", lambda job: None)
    monkeypatch.setattr(mpirun, "is_root", lambda node: False)
    monkeypatch.setattr(mpirun, "_attempt", attempt)
    monkeypatch.setattr(mpirun.time, "sleep", pauses.append)
    return pauses, made


def test_a_third_launch_that_starts_is_recorded_with_the_launches_made(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pauses, made = _launches(monkeypatch, [(NO_DAEMON, NOTHING, ""), (Shell(255), NOTHING, ""),
                                           (Shell(0), RECORD, "")])
    monkeypatch.setattr(mpirun, "_daemons_did_not_start",
                        lambda done: done.exit_code in (213, 255))
    record = run_mpi_job(_job(), tmp_path).record
    assert len(made) == 3 and pauses == list(mpirun.RELAUNCH_PAUSE_S)
    assert record["launches"] == 3 and record["status"] == "ok"
    assert record["relaunched_after"].startswith("mpirun exit 213")  # the first failure
    assert json.loads((tmp_path / "result.json").read_text())["launches"] == 3


def test_three_launches_without_daemons_end_in_an_error_naming_them(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pauses, made = _launches(monkeypatch, [(NO_DAEMON, NOTHING, "")] * 3)
    with pytest.raises(RemoteError) as raised:
        run_mpi_job(_job(), tmp_path)
    assert len(made) == 3 and len(pauses) == 2
    message = str(raised.value)
    assert "exit 213, launch 3 of 3, started again after 2 failed launch(es)" in message
    assert not (tmp_path / "result.json").exists()


@pytest.mark.parametrize(("outcome", "words"), [
    ((NO_DAEMON, NOTHING, '{"rank": 1, "error": "boom"}'), "boom"),  # a rank ran and failed
    ((Shell(1, stderr="no such file: python3"), NOTHING, ""), "no such file"),
])
def test_a_launch_that_failed_otherwise_is_not_made_again(
        outcome: tuple[Shell, Shell, str], words: str, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    pauses, made = _launches(monkeypatch, [outcome])
    with pytest.raises(RemoteError, match=words) as raised:
        run_mpi_job(_job(), tmp_path)
    assert len(made) == 1 and pauses == []
    assert "launch 1 of 3)" in str(raised.value)

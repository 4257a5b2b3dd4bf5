"""Building the training record from every rank's measurements (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the train extra (torch) is not installed")

from loadgen.train import result
from loadgen.train.stats import exposed_comm_share, slowest_rank_per_step


def _rank(rank: int, steps: list[float], digest: str = "d", start: float = 100.0,
          batch: int = 32) -> dict[str, object]:
    return {
        "rank": rank, "local_rank": rank % 2, "node_rank": rank // 2, "host": f"h{rank // 2}",
        "device": "cpu", "batch_size": batch, "step_times_s": steps,
        "timed_start_unix": start, "timed_end_unix": start + sum(steps),
        "synced_fb_s": [0.5, 0.5, 0.5], "unsynced_fb_s": [0.4, 0.4, 0.4], "param_digest": digest,
    }


def test_totals_sum_what_each_rank_measured() -> None:
    ranks = [_rank(0, [0.1, 0.1]), _rank(1, [0.2, 0.2]), _rank(2, [0.1, 0.3])]
    built = result.training_totals(ranks)
    per_rank = [r["images_per_s"] for r in built["ranks"]]
    assert per_rank == pytest.approx([320.0, 160.0, 160.0])
    assert built["totals"]["images_per_s"] == pytest.approx(640.0)  # not 3 x rank 0's 320
    assert built["totals"]["global_batch"] == 96
    assert built["totals"]["step_time_s"]["max"] == pytest.approx(0.3)
    assert built["totals"]["params_in_sync"] is True


def test_diverged_parameters_are_reported() -> None:
    built = result.training_totals([_rank(0, [0.1], "a"), _rank(1, [0.1], "b")])
    assert built["totals"]["params_in_sync"] is False


def test_wallclock_throughput_uses_the_whole_measured_window() -> None:
    built = result.training_totals([_rank(0, [1.0], start=10.0), _rank(1, [1.0], start=11.0)])
    assert built["totals"]["wallclock_images_per_s"] == pytest.approx(64 / 2.0)


def test_job_step_is_the_slowest_rank_and_comm_share_is_the_exposed_part() -> None:
    assert slowest_rank_per_step([[0.1, 0.5], [0.3, 0.2]]) == [0.3, 0.5]
    assert exposed_comm_share([0.5, 0.5, 0.6], [0.4, 0.4, 0.1]) == pytest.approx(0.2)
    assert exposed_comm_share([0.4], [0.5]) == 0.0  # noise never gives a negative share
    built = result.training_totals([_rank(0, [0.1])])
    assert built["communication"]["share_mean"] == pytest.approx(0.2)


def test_record_is_validated_and_written_atomically(tmp_path: Path) -> None:
    record = result.base_record("train", {"model": "resnet50"}, "ok", "")
    with pytest.raises(ValueError, match="lacks 'ranks'"):
        result.write_record(tmp_path, record)
    assert not (tmp_path / "result.json").exists()
    record.update(result.training_totals([_rank(0, [0.1])]), world_size=2, backend="gloo",
                  settings={})
    with pytest.raises(ValueError, match="one entry per rank"):
        result.write_record(tmp_path, record)
    record["world_size"] = 1
    path = result.write_record(tmp_path, record)
    assert path.read_text().startswith("{") and list(tmp_path.iterdir()) == [path]

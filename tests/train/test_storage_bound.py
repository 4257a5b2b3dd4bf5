"""Storage as the bound, for real: the harness reads its shards from an ext4 loop disk
whose reads a blkio cgroup throttles. Halving the read rate roughly halves input MB/s and
images/s, and the summary names storage as the bound. (This kernel has no NFS, so a disk
throttled at the block layer stands in for a slow NFS export.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="the train extra (torch) is not installed")

from tests.labs.throttled_disk import ThrottledDisk, throttled_disk_available
from vgpu.cli.train_view import input_summary
from vgpu.datasets.make import make_dataset
from vgpu.train.storage import local_storage

pytestmark = [pytest.mark.train, pytest.mark.slow]
FAST_BPS = 4_000_000
BATCH, STEPS = 8, 8


def _leg(disk: ThrottledDisk, dataset: Path, out: Path, bytes_per_s: int) -> dict[str, Any]:
    disk.set_read_bps(bytes_per_s)
    spec = out.parent / f"{out.name}.json"
    spec.write_text(json.dumps({
        "schema_version": 1, "model": "resnet-tiny", "image_size": 32, "batch_size": BATCH,
        "warmup_steps": 1, "measured_steps": STEPS, "comm_probe_steps": 0, "threads": 1,
        "data": {"source": "files", "path": str(dataset), "workers": 2, "cache": "evict"}}))
    done = subprocess.run([*disk.command_prefix, sys.executable, "-m", "loadgen.train",
                           "train", str(spec), "--out", str(out)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    record: dict[str, Any] = json.loads((out / "result.json").read_text())
    return record


def test_halving_the_read_rate_halves_input_and_images(tmp_path: Path) -> None:
    reason = throttled_disk_available()
    if reason:
        pytest.skip(reason)
    with ThrottledDisk(96) as disk:
        dataset = disk.mount / "set"
        make_dataset(dataset, 240, "small", seed=5, images_per_shard=12)
        assert local_storage(str(dataset)).kind == "loop device (ext4)"
        fast = _leg(disk, dataset, tmp_path / "fast", FAST_BPS)
        slow = _leg(disk, dataset, tmp_path / "slow", FAST_BPS // 2)
    for record in (fast, slow):
        assert record["input"]["bound"] == "storage", record["input"]
        assert record["input"]["page_cache"].startswith("cold")
        assert (input_summary(record) or "").endswith("bound: storage")
    mb_ratio = slow["input"]["input_mb_per_s"] / fast["input"]["input_mb_per_s"]
    images_ratio = slow["totals"]["images_per_s"] / fast["totals"]["images_per_s"]
    assert 0.35 <= mb_ratio <= 0.7, (fast["input"], slow["input"])
    assert 0.35 <= images_ratio <= 0.7, (fast["totals"], slow["totals"])
    assert fast["input"]["input_mb_per_s"] <= FAST_BPS / 1e6 * 1.3

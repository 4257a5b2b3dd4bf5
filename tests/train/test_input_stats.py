"""The input side of file-fed training, pure: MB/s from bytes read, shares, the named
bound, the page-cache verdict, shard assignment and the crop."""

from __future__ import annotations

import random

import pytest

from loadgen.train.inputstats import job_input, mb_per_s, name_bound, rank_input
from loadgen.train.nodestats import cache_verdict
from loadgen.train.shards import Shard


@pytest.mark.parametrize(("wait", "read", "device", "bound"), [
    (0.05, 0.9, "gpu", "gpu"),
    (0.05, 0.1, "cpu", "compute"),
    (0.19, 0.99, "cpu", "compute"),
    (0.6, 0.8, "gpu", "storage"),
    (0.6, 0.5, "cpu", "storage"),
    (0.6, 0.2, "cpu", "decode"),
    (0.25, 0.49, "gpu", "decode"),
])
def test_bound_is_named_from_the_shares(wait: float, read: float, device: str,
                                        bound: str) -> None:
    assert name_bound(wait, read, device) == bound


def test_mb_per_s_is_decimal_megabytes_over_the_window() -> None:
    assert mb_per_s(12_000_000, 4.0) == 3.0
    assert mb_per_s(5, 0.0) == 0.0


def _batch(nbytes: int, read_s: float, decode_s: float) -> dict[str, object]:
    return {"count": 8, "bytes": nbytes, "read_s": read_s, "decode_s": decode_s,
            "shared_shards": False}


def test_rank_input_sums_the_consumed_batches() -> None:
    rank = rank_input([_batch(1_000_000, 0.3, 0.1), _batch(3_000_000, 0.5, 0.1)],
                      wait_s=[0.2, 0.4], window_s=2.0, worker_cpu_s=1.0, workers=2)
    assert rank["images"] == 16
    assert rank["bytes_read"] == 4_000_000
    assert rank["input_mb_per_s"] == 2.0
    assert rank["wait_s"] == pytest.approx(0.6)
    assert rank["worker_cpu_utilisation"] == 0.25


def test_job_input_adds_rates_and_names_storage() -> None:
    ranks = [rank_input([_batch(2_000_000, 0.9, 0.1)], [1.0], 2.0, 0.2, 1),
             rank_input([_batch(6_000_000, 0.7, 0.3)], [1.0], 2.0, 0.2, 1)]
    job = job_input(ranks, "gpu")
    assert job["input_mb_per_s"] == 4.0
    assert job["read_share"] == pytest.approx(0.8)
    assert job["decode_share"] == pytest.approx(0.2)
    assert job["data_wait_share"] == 0.5
    assert job["worker_cpu_utilisation"] == pytest.approx(0.1)
    assert job["bound"] == "storage"


def test_page_cache_verdict() -> None:
    evicted = "evicted (posix_fadvise DONTNEED on the dataset's files)"
    assert cache_verdict(evicted, 100, 80, 10**9).startswith("cold: cache emptied")
    assert cache_verdict(evicted, 100, 180, 10**9) == "cache-warm possible"
    assert cache_verdict("kept (cache warm)", 100, 80, 10**9) == "cache-warm possible"
    assert cache_verdict("kept (cache warm)", 100, 180, 50) == \
        "cold: dataset larger than memory"
    assert cache_verdict(evicted, 100, 80, 10**9, shared_shards=True).startswith(
        "cache-warm possible")


torch = pytest.importorskip("torch", reason="the train extra (torch) is not installed")
from loadgen.train.pipeline import assign_shards, crop_box  # noqa: E402


def _shards(count: int) -> tuple[Shard, ...]:
    return tuple(Shard(f"s{i}.tar", 1, 1, "x", 0) for i in range(count))


def test_enough_shards_are_split_disjointly_between_readers() -> None:
    shards = _shards(7)
    readers = [assign_shards(shards, r, 3) for r in range(3)]
    files = [s.file for reader in readers for s in reader.shards]
    assert sorted(files) == sorted(s.file for s in shards)
    assert not any(reader.shared for reader in readers)


def test_too_few_shards_are_shared_from_staggered_starts() -> None:
    readers = [assign_shards(_shards(2), r, 4) for r in range(4)]
    assert all(reader.shared and len(reader.shards) == 2 for reader in readers)
    assert [reader.shards[0].file for reader in readers] == ["s0.tar", "s1.tar"] * 2


def test_random_crops_stay_inside_the_image() -> None:
    rng = random.Random(0)
    for _ in range(200):
        left, top, right, bottom = crop_box(500, 375, rng)
        assert 0 <= left < right <= 500 and 0 <= top < bottom <= 375
        assert (right - left) * (bottom - top) >= 0.07 * 500 * 375


def test_cpu_compute_bound_says_what_decode_took_from_it() -> None:
    busy = rank_input([_batch(1_000_000, 0.1, 0.9)], [0.01], 2.0, 1.0, 2, node_cores=2)
    assert busy["worker_node_cpu_share"] == 0.25
    job = job_input([busy], "cpu")
    assert job["bound"] == "compute"
    assert job["bound_note"] == ("training on the CPU: the decode workers took 25% of the "
                                 "node's CPU time from the compute")
    idle = rank_input([_batch(1_000_000, 0.1, 0.9)], [0.01], 2.0, 0.1, 2, node_cores=2)
    assert job_input([idle], "cpu")["bound_note"] == ""

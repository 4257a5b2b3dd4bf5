"""What fed a file-fed run and what held it back: input MB/s from the bytes the consumed
batches read, the workers' split of time between reading and decoding, how long the rank
waited for data, and the bound named from those shares (pure; no torch)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# Below this share of step time spent waiting for batches, the input kept up: the device
# (its compute) was the bound. Above it, the workers' larger share names the bound.
WAIT_SHARE_BOUND = 0.2
BOUNDS = ("gpu", "compute", "decode", "storage")
CONTENTION_SHARE = 0.1


def name_bound(data_wait_share: float, read_share: float, device_kind: str) -> str:
    """gpu/compute when the rank rarely waited for data; else storage when the workers
    spent most of their time reading, decode when they spent it decoding."""
    if data_wait_share < WAIT_SHARE_BOUND:
        return "gpu" if device_kind == "gpu" else "compute"
    return "storage" if read_share >= 0.5 else "decode"


def decode_contention_note(bound: str, worker_node_cpu_share: float) -> str:
    """On a CPU the ranks' compute and the workers' decode share the cores, so a compute
    bound is partly decode's doing: said with the share the workers took."""
    if bound != "compute" or worker_node_cpu_share < CONTENTION_SHARE:
        return ""
    return (f"training on the CPU: the decode workers took {worker_node_cpu_share:.0%} of "
            "the node's CPU time from the compute")


def share(part: float, whole: float) -> float:
    return part / whole if whole > 0 else 0.0


def mb_per_s(bytes_read: int, seconds: float) -> float:
    """Decimal megabytes per second, as storage vendors and the study quote them."""
    return bytes_read / 1e6 / seconds if seconds > 0 else 0.0


def rank_input(batches: Sequence[Mapping[str, Any]], wait_s: Sequence[float],
               window_s: float, worker_cpu_s: float, workers: int,
               node_cores: int = 1) -> dict[str, Any]:
    """One rank's input during its measured window, from the batches it consumed."""
    bytes_read = sum(int(b["bytes"]) for b in batches)
    read_s = sum(float(b["read_s"]) for b in batches)
    decode_s = sum(float(b["decode_s"]) for b in batches)
    return {
        "images": sum(int(b["count"]) for b in batches),
        "bytes_read": bytes_read,
        "read_s": read_s,
        "decode_s": decode_s,
        "wait_s": sum(wait_s),
        "window_s": window_s,
        "input_mb_per_s": mb_per_s(bytes_read, window_s),
        "worker_cpu_s": worker_cpu_s,
        "workers": workers,
        "worker_cpu_utilisation": share(worker_cpu_s, window_s * workers),
        "worker_node_cpu_share": share(worker_cpu_s, window_s * node_cores),
        "shared_shards": any(b.get("shared_shards") for b in batches),
    }


def job_input(per_rank: Sequence[Mapping[str, Any]], device_kind: str) -> dict[str, Any]:
    """The job's input: rates summed over ranks, shares over all their seconds."""
    read_s = sum(r["read_s"] for r in per_rank)
    decode_s = sum(r["decode_s"] for r in per_rank)
    wait_share = share(sum(r["wait_s"] for r in per_rank), sum(r["window_s"] for r in per_rank))
    read_share = share(read_s, read_s + decode_s)
    workers = sum(r["workers"] for r in per_rank)
    bound = name_bound(wait_share, read_share, device_kind)
    node_share = max((r.get("worker_node_cpu_share", 0.0) for r in per_rank), default=0.0)
    return {
        "input_mb_per_s": sum(r["input_mb_per_s"] for r in per_rank),
        "bytes_read": sum(r["bytes_read"] for r in per_rank),
        "read_share": read_share,
        "decode_share": share(decode_s, read_s + decode_s),
        "data_wait_share": wait_share,
        "worker_cpu_utilisation": share(
            sum(r["worker_cpu_s"] for r in per_rank),
            sum(r["window_s"] * r["workers"] for r in per_rank)),
        "workers": workers,
        "bound": bound,
        "bound_note": decode_contention_note(bound, node_share),
        "bound_rule": f"data wait < {WAIT_SHARE_BOUND:.0%} of step time: the device; else "
                      "storage when the workers spent >= half their time reading, decode "
                      "when they spent it decoding",
        "shared_shards": any(r["shared_shards"] for r in per_rank),
    }

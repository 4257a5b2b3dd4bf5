"""Measurements of the node around a file-fed run: CPU seconds of this process's child
processes (the input workers) from /proc, the page cache before the run, and the GPU's
utilisation sampled through NVML (absent on a CPU, never invented)."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from loadgen.train.shards import Manifest, is_url

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def child_pids(pid: int | None = None) -> list[int]:
    """Direct children of ``pid`` (default: this process), from /proc/<pid>/task/*/children."""
    found: list[int] = []
    for task in Path(f"/proc/{pid or os.getpid()}/task").glob("*"):
        try:
            found += [int(word) for word in (task / "children").read_text().split()]
        except OSError:
            continue
    return sorted(set(found))


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process (0 once it is gone)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = text.rsplit(")", 1)[1].split()  # the name in parentheses may hold spaces
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime


def children_cpu(pids: list[int]) -> dict[int, float]:
    return {pid: cpu_seconds(pid) for pid in pids}


def memory_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _evict(root: str, manifest: Manifest) -> None:
    for shard in manifest.shards:
        fd = os.open(Path(root) / shard.file, os.O_RDONLY)
        try:
            os.fdatasync(fd)  # dirty pages (a dataset just written) are not evicted
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _drop_node_cache() -> str | None:
    """None when the node's page cache was dropped, else why not."""
    if os.geteuid() != 0:
        return "not root"
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def prepare_cache(root: str, manifest: Manifest, mode: str) -> str:
    """Empties the page cache of the dataset as ``mode`` asks; says what was done."""
    if is_url(root):
        return "remote (http): the server's page cache is not controlled from the node"
    if mode == "warm":
        return "kept (cache warm)"
    if mode == "drop":
        why_not = _drop_node_cache()
        if why_not is None:
            return "dropped (/proc/sys/vm/drop_caches)"
        _evict(root, manifest)
        return f"evicted (posix_fadvise DONTNEED; drop_caches failed: {why_not})"
    _evict(root, manifest)
    return "evicted (posix_fadvise DONTNEED on the dataset's files)"


def cache_verdict(before_run: str, dataset_bytes: int, bytes_read: int,
                  memory: int | None, shared_shards: bool = False) -> str:
    """Whether the reads can have come from the page cache."""
    if memory is not None and dataset_bytes > memory:
        return "cold: dataset larger than memory"
    if shared_shards:
        return "cache-warm possible: fewer shards than readers, a shard is read twice"
    if before_run.startswith(("evicted", "dropped")) and bytes_read <= dataset_bytes:
        return "cold: cache emptied before the run and no file read twice"
    return "cache-warm possible"


class GpuSampler:
    """The device's utilisation (NVML, via torch.cuda.utilization) every ``period_s``
    while running; on a CPU nothing is sampled and the record says so."""

    def __init__(self, device: Any, period_s: float = 0.2) -> None:
        self.device, self.period_s = device, period_s
        self.samples: list[float] = []
        self.note = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self.device.type != "cuda":
            self.note = "no GPU: not measured"
            return
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import torch

        while not self._stop.is_set():
            try:
                self.samples.append(float(torch.cuda.utilization(self.device)))
            except Exception as exc:  # pynvml missing, NVML refused: said, not guessed
                self.note = f"NVML unavailable: {type(exc).__name__}: {exc}"
                return
            self._stop.wait(self.period_s)

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        mean = sum(self.samples) / len(self.samples) if self.samples else None
        return {"gpu_utilisation_pct": mean, "samples": len(self.samples),
                "note": self.note if mean is None else ""}

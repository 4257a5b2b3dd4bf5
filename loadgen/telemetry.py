"""Telemetry sampled in a background thread during the timed run.

Always: CPU model and count, this process's CPU % and RSS (psutil if present, else /proc),
and what else used the machine during the timed run (``HostLoad``: the machine's busy CPU
from /proc/stat less this process tree's own, CPU steal, the load average, cgroup CPU
throttling). Where NVML works (``pynvml.nvmlInit`` succeeds): device name, MIG profile and
UUID, driver and CUDA versions, and sampled memory, power, clocks, utilisation, the other
processes on the device and the clock-throttle reasons. A metric NVML refuses
(utilisation on a MIG slice is NOT_SUPPORTED) is sampled no further and listed with the
reason under ``unsupported``.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from loadgen.spec import DeviceSpec

SAMPLE_INTERVAL_S = 0.5
MAX_KEPT_SAMPLES = 2000
MIG_PROFILE = re.compile(r"MIG (\d+g\.\d+gb(?:\+me)?)", re.IGNORECASE)


def cpu_model() -> str | None:
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return None


class ProcessSampler:
    """CPU % (of one core) and RSS of this process, via psutil or /proc/self."""

    def __init__(self) -> None:
        try:
            import psutil

            self._process: Any = psutil.Process()
            self._process.cpu_percent(None)
            self.source = "psutil"
        except ImportError:
            self._process = None
            self.source = "/proc"
            self._last = (time.monotonic(), self._proc_cpu_seconds())

    @staticmethod
    def _proc_cpu_seconds() -> float:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def sample(self) -> tuple[float, int]:
        if self._process is not None:
            return self._process.cpu_percent(None), self._process.memory_info().rss
        now, cpu = time.monotonic(), self._proc_cpu_seconds()
        last_t, last_cpu = self._last
        self._last = (now, cpu)
        percent = 100.0 * (cpu - last_cpu) / (now - last_t) if now > last_t else 0.0
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return percent, pages * os.sysconf("SC_PAGE_SIZE")


def _proc_stat_seconds() -> tuple[float, float, float] | None:
    """Machine-wide (busy, steal, total) CPU seconds since boot from /proc/stat's cpu line
    (busy: user, nice, system, irq, softirq; guest time is inside user)."""
    try:
        line = Path("/proc/stat").read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    ticks = [int(v) for v in line.split()[1:]]
    ticks += [0] * (8 - len(ticks))
    user, nice, system, idle, iowait, irq, softirq, steal = ticks[:8]
    hz = os.sysconf("SC_CLK_TCK")
    busy = user + nice + system + irq + softirq
    return busy / hz, steal / hz, (busy + idle + iowait + steal) / hz


def _own_tree_seconds() -> float:
    """CPU seconds of this process (all threads), its reaped children and its live
    descendants."""
    times = os.times()
    reaped = times.children_user + times.children_system
    try:
        import psutil
    except ImportError:
        return times.user + times.system + reaped
    me = psutil.Process()
    total = reaped
    for process in [me, *me.children(recursive=True)]:
        try:
            cpu = process.cpu_times()
        except psutil.Error:
            continue
        total += cpu.user + cpu.system
    return total


def _cgroup_throttling() -> tuple[int, float] | None:
    """(throttled periods, throttled seconds) of this cgroup (v2 cpu.stat), if readable."""
    try:
        text = Path("/sys/fs/cgroup/cpu.stat").read_text()
    except OSError:
        return None
    values = dict(line.split() for line in text.splitlines() if len(line.split()) == 2)
    if "nr_throttled" not in values:
        return None
    return int(values["nr_throttled"]), int(values.get("throttled_usec", 0)) / 1e6


class HostLoad:
    """What else used the machine between ``start`` and ``stop``: the busy CPU seconds of
    the whole machine less those of this process tree (the harness), as a share of the
    machine's CPU (all cores over the wall time); the steal share; the 1-minute load
    average at the end; cgroup throttling. The busy and own seconds are kept too, so a
    caller that knows other harness instances ran on the same machine can subtract
    theirs."""

    def __init__(self) -> None:
        self._start: tuple[float, tuple[float, float, float] | None, float,
                           tuple[int, float] | None] | None = None

    def start(self) -> None:
        self._start = (time.monotonic(), _proc_stat_seconds(), _own_tree_seconds(),
                       _cgroup_throttling())

    def stop(self) -> dict[str, Any]:
        if self._start is None:
            return {"available": False, "reason": "never started"}
        began, stat0, own0, throttle0 = self._start
        wall = time.monotonic() - began
        stat1, own1, throttle1 = _proc_stat_seconds(), _own_tree_seconds(), _cgroup_throttling()
        cpus = os.cpu_count() or 1
        if stat0 is None or stat1 is None or wall <= 0:
            return {"available": False, "reason": "/proc/stat is not readable"}
        busy, steal = stat1[0] - stat0[0], stat1[1] - stat0[1]
        own = max(0.0, own1 - own0)
        capacity = wall * cpus
        record: dict[str, Any] = {
            "available": True, "wall_s": wall, "cpus": cpus, "busy_cpu_s": busy,
            "own_cpu_s": own, "steal_cpu_s": steal,
            "other_cpu_share": max(0.0, busy - own) / capacity,
            "steal_share": steal / capacity,
            "load_avg_1m": os.getloadavg()[0],
        }
        if throttle0 is not None and throttle1 is not None:
            record["throttled_periods"] = throttle1[0] - throttle0[0]
            record["throttled_s"] = throttle1[1] - throttle0[1]
        return record


# Another process on the run's device disturbs it only when it uses the device: more
# memory than an idle CUDA context holds (a notebook, an agent or a monitor that merely
# opened the GPU holds 0.3-0.6 GiB and no SM time), or a share of the SMs.
OTHER_PROCESS_MEMORY_FLOOR_BYTES = 1024**3
OTHER_PROCESS_SM_FLOOR_PERCENT = 5.0
# The server a backend talks to runs on the device by design: never "another process".
SERVER_COMMANDS = {
    "triton": ("tritonserver",),
    "openai": ("loadgen.llm.server", "vllm", "sglang", "text-generation-launcher",
               "trtllm-serve", "llama-server", "ollama"),
}
UNSEEN_COMMAND = "(not in this PID namespace)"


def own_process_tree() -> set[int]:
    """This process and its live descendants (the loopback LLM server among them)."""
    me = os.getpid()
    try:
        import psutil
    except ImportError:
        return {me}
    try:
        return {me, *(c.pid for c in psutil.Process(me).children(recursive=True))}
    except psutil.Error:
        return {me}


def process_command(pid: int) -> str | None:
    """The command line of ``pid`` as this PID namespace sees it; None if it is not here."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    command = raw.replace(b"\0", b" ").decode(errors="replace").strip()
    return command[:200] or f"[pid {pid}]"


class DeviceProcesses:
    """The processes NVML lists on the device that disturb the run: above a floor of
    memory or SM share, and neither this harness's process tree nor the backend's own
    server (``servers``: command words, SERVER_COMMANDS). In a container without the
    host's PID namespace NVML's PIDs are the host's: when this process is not among them,
    the listed process this namespace cannot see that holds the most memory is taken to
    be this harness. Every disturbing process is kept (PID, command, most memory, most SM
    share) for the record."""

    def __init__(self, nvml: Any, handle: Any, servers: tuple[str, ...] = (),
                 own: Callable[[], set[int]] = own_process_tree,
                 command: Callable[[int], str | None] = process_command) -> None:
        self.nvml, self.handle, self.servers = nvml, handle, servers
        self._own, self._command = own, command
        self._last_utilisation = 0
        self.sm_supported = True
        self.seen: dict[int, dict[str, Any]] = {}

    def _sm_percent(self) -> dict[int, float]:
        """Each process's SM share since the last reading, where NVML has it (not on a MIG
        slice)."""
        if not self.sm_supported:
            return {}
        try:
            samples = self.nvml.nvmlDeviceGetProcessUtilization(self.handle,
                                                                self._last_utilisation)
        except Exception as exc:
            # No sample since the last reading is NVML_ERROR_NOT_FOUND: nothing ran.
            if "Not Found" in str(exc):
                return {}
            self.sm_supported = False
            return {}
        shares: dict[int, float] = {}
        for sample in samples:
            shares[int(sample.pid)] = max(shares.get(int(sample.pid), 0.0),
                                          float(sample.smUtil))
            self._last_utilisation = max(self._last_utilisation, int(sample.timeStamp))
        return shares

    def sample(self) -> list[dict[str, Any]]:
        """The disturbing processes now."""
        listed = list(self.nvml.nvmlDeviceGetComputeRunningProcesses(self.handle))
        sm = self._sm_percent()
        own = self._own()
        commands = {int(p.pid): self._command(int(p.pid)) for p in listed}
        harness_unseen = None
        if not own & set(commands):
            unseen = [p for p in listed if commands[int(p.pid)] is None]
            if unseen:
                harness_unseen = int(max(unseen, key=_memory_of).pid)
        found = []
        for process in listed:
            pid = int(process.pid)
            command = commands[pid]
            if pid in own or pid == harness_unseen:
                continue
            if command is not None and any(word in command for word in self.servers):
                continue
            memory, share = _memory_of(process), sm.get(pid, 0.0)
            if memory <= OTHER_PROCESS_MEMORY_FLOOR_BYTES and \
                    share <= OTHER_PROCESS_SM_FLOOR_PERCENT:
                continue
            entry = self.seen.setdefault(pid, {"pid": pid,
                                               "command": command or UNSEEN_COMMAND,
                                               "memory_bytes_max": 0, "sm_percent_max": 0.0})
            entry["memory_bytes_max"] = max(entry["memory_bytes_max"], memory)
            entry["sm_percent_max"] = max(entry["sm_percent_max"], share)
            found.append(entry)
        return found


def _memory_of(process: Any) -> int:
    used = getattr(process, "usedGpuMemory", None)
    return int(used) if used else 0


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class NvmlDevice:
    """Static facts and metric readers for the GPU or MIG slice the run is bound to."""

    def __init__(self, nvml: Any, device: DeviceSpec,
                 servers: tuple[str, ...] = ()) -> None:
        self.nvml = nvml
        if device.uuid is not None:
            handle = nvml.nvmlDeviceGetHandleByUUID(device.uuid)
        else:
            handle = nvml.nvmlDeviceGetHandleByIndex(device.index or 0)
        self.handle = handle
        self.is_mig = bool(nvml.nvmlDeviceIsMigDeviceHandle(handle))
        self.parent = (nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle)
                       if self.is_mig else handle)
        name = _text(nvml.nvmlDeviceGetName(handle))
        profile = MIG_PROFILE.search(name) if self.is_mig else None
        cuda = nvml.nvmlSystemGetCudaDriverVersion()
        self.info: dict[str, Any] = {
            "name": name,
            "parent_name": _text(nvml.nvmlDeviceGetName(self.parent)),
            "uuid": _text(nvml.nvmlDeviceGetUUID(handle)),
            "is_mig": self.is_mig,
            "mig_profile": profile.group(1) if profile else None,
            "mig_uuid": _text(nvml.nvmlDeviceGetUUID(handle)) if self.is_mig else None,
            "driver_version": _text(nvml.nvmlSystemGetDriverVersion()),
            "cuda_driver_version": f"{cuda // 1000}.{cuda % 1000 // 10}",
        }
        self.processes = DeviceProcesses(nvml, handle, servers)

    def readers(self) -> dict[str, Callable[[], float]]:
        n, h, parent = self.nvml, self.handle, self.parent
        return {
            "memory_used_bytes": lambda: float(n.nvmlDeviceGetMemoryInfo(h).used),
            # Power and clocks belong to the physical GPU, shared by all of its MIG slices.
            "power_w": lambda: n.nvmlDeviceGetPowerUsage(parent) / 1000.0,
            "sm_clock_mhz": lambda: float(n.nvmlDeviceGetClockInfo(parent, n.NVML_CLOCK_SM)),
            "memory_clock_mhz": lambda: float(n.nvmlDeviceGetClockInfo(parent, n.NVML_CLOCK_MEM)),
            "gpu_utilization_percent": lambda: float(n.nvmlDeviceGetUtilizationRates(h).gpu),
            "memory_utilization_percent": lambda: float(
                n.nvmlDeviceGetUtilizationRates(h).memory),
            # what else used the device, and why its clocks were held down (bit mask)
            "other_processes": lambda: float(len(self.processes.sample())),
            "clocks_throttle_reasons": lambda: float(
                n.nvmlDeviceGetCurrentClocksThrottleReasons(parent)),
        }


def _load_nvml() -> tuple[ModuleType | None, str | None]:
    try:
        import pynvml
    except ImportError:
        return None, "nvidia-ml-py (pynvml) is not installed"
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return None, f"nvmlInit failed: {exc}"
    return pynvml, None


def _summary(samples: list[tuple[float, float]]) -> dict[str, Any]:
    values = [v for _, v in samples]
    return {
        "count": len(values),
        "mean": sum(values) / len(values) if values else None,
        "min": min(values) if values else None,
        "max": max(values) if values else None,
        "samples": [[round(t, 3), v] for t, v in samples[:MAX_KEPT_SAMPLES]],
    }


class Telemetry:
    def __init__(self, device: DeviceSpec, nvml: Any = None,
                 interval_s: float = SAMPLE_INTERVAL_S, servers: tuple[str, ...] = ()) -> None:
        self.device = device
        self.servers = servers
        self.interval_s = interval_s
        self.process = ProcessSampler()
        self.host_load = HostLoad()
        self._process_samples: list[tuple[float, float, int]] = []
        self._gpu_samples: dict[str, list[tuple[float, float]]] = {}
        self.unsupported: dict[str, str] = {}
        self.gpu: NvmlDevice | None = None
        self.nvml_status: dict[str, Any] = {"available": False}
        if device.kind != "cpu":
            self._open_nvml(nvml)
        self._readers = self.gpu.readers() if self.gpu else {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="telemetry")
        self._started = 0.0

    def _open_nvml(self, nvml: Any) -> None:
        reason = None
        if nvml is None:
            nvml, reason = _load_nvml()
        if nvml is None:
            self.nvml_status = {"available": False, "reason": reason}
            return
        try:
            self.gpu = NvmlDevice(nvml, self.device, self.servers)
            self.nvml_status = {"available": True}
        except Exception as exc:
            self.nvml_status = {"available": False, "reason": f"NVML device lookup: {exc}"}

    def start(self) -> None:
        self.process.sample()  # CPU % is measured from here, not from construction
        self.host_load.start()
        self._started = time.time()
        self._thread.start()

    def _sample_once(self) -> None:
        now = time.time() - self._started
        cpu, rss = self.process.sample()
        self._process_samples.append((now, cpu, rss))
        for name, read in list(self._readers.items()):
            try:
                self._gpu_samples.setdefault(name, []).append((now, read()))
            except Exception as exc:
                self.unsupported[name] = str(exc) or type(exc).__name__
                self._readers.pop(name)
                self._gpu_samples.pop(name, None)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample_once()

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self._sample_once()
        load = self.host_load.stop()
        cpu = [c for _, c, _ in self._process_samples]
        rss = [r for _, _, r in self._process_samples]
        record: dict[str, Any] = {
            "interval_s": self.interval_s,
            "host": {
                "pid": os.getpid(),  # siblings on one machine tell each other apart by it
                "cpu_model": cpu_model(),
                "cpu_count": os.cpu_count(),
                "process_source": self.process.source,
                "process_cpu_percent_mean": sum(cpu) / len(cpu),
                "process_cpu_percent_max": max(cpu),
                "process_rss_bytes_max": max(rss),
                "samples": len(cpu),
                "load": load,
            },
            "nvml": self.nvml_status,
            "gpu": None,
        }
        if self.gpu is not None:
            record["gpu"] = {
                **self.gpu.info,
                "metrics": {name: _summary(s) for name, s in self._gpu_samples.items()},
                "unsupported": dict(self.unsupported),
                "other_processes": {
                    "seen": sorted(self.gpu.processes.seen.values(), key=lambda p: p["pid"]),
                    "memory_floor_bytes": OTHER_PROCESS_MEMORY_FLOOR_BYTES,
                    "sm_floor_percent": OTHER_PROCESS_SM_FLOOR_PERCENT,
                    "sm_share_read": self.gpu.processes.sm_supported,
                    "servers_ignored": list(self.servers),
                },
            }
        return record

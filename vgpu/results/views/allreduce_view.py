"""The communication runtimes side by side: stored allreduce probes (MPI, Gloo, NCCL), one
column pair per probe (busbw and time at each message size), the link each crossed and
the peak busbw's share of it, in the scaling report's plain-text style. The training
probes (vgpu.train) store them under these names; `vgpu report` and `vgpu train runtimes`
read them back from here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vgpu.errors import InputError
from vgpu.results.store.result_store import ResultStore

MIB = 1 << 20
PROBE_KIND = "allreduce"  # the run kind of every allreduce probe (Gloo, NCCL, MPI)


def size_label(size_bytes: int) -> str:
    """"64MiB" / "4KiB" / "100B": the instance a probe's per-size metrics are stored as."""
    if size_bytes >= MIB and size_bytes % MIB == 0:
        return f"{size_bytes // MIB}MiB"
    if size_bytes >= 1024 and size_bytes % 1024 == 0:
        return f"{size_bytes // 1024}KiB"
    return f"{size_bytes}B"


def link_gb_s(speed_gbps: float | None) -> float | None:
    """The link's rate in GB/s (busbw's unit); None when the scenario gives no link."""
    return None if speed_gbps is None else speed_gbps / 8


def link_label(speed_gbps: float | None, rdma: str | None = None,
               interface: str | None = None) -> str:
    """"100 Gbit/s RDMA roce" / "100 Mbit/s" / "-" when no link was recorded."""
    if speed_gbps is None:
        return "-"
    shown = f"{speed_gbps * 1000:g} Mbit/s" if speed_gbps < 1 else f"{speed_gbps:g} Gbit/s"
    parts = [shown]
    if rdma and rdma != "none":
        parts.append(f"RDMA {rdma}")
    if interface:
        parts.append(interface)
    return " ".join(parts)


@dataclass(frozen=True)
class RuntimeProbe:
    run_id: int
    backend: str
    world_size: int
    nodes: int
    link_speed_gbps: float | None
    link: str
    sizes_bytes: tuple[int, ...]
    busbw: dict[str, float]  # size label -> GB/s
    time_us: dict[str, float]
    scenario_id: str = ""
    target_kind: str = ""

    @property
    def title(self) -> str:
        return f"{self.backend} {self.world_size}r/{self.nodes}n #{self.run_id}"

    @property
    def peak_busbw(self) -> float | None:
        return max(self.busbw.values()) if self.busbw else None

    @property
    def link_share(self) -> float | None:
        link = link_gb_s(self.link_speed_gbps)
        peak = self.peak_busbw
        return None if link is None or peak is None else peak / link


def load_probe(store: ResultStore, run_id: int) -> RuntimeProbe:
    run = store.run(run_id)
    if run is None or run.kind != PROBE_KIND:
        raise InputError.single("results store", "RUN_ID", f"run {run_id} is no allreduce "
                                "probe", fix="give run ids of `vgpu train probe` or "
                                "`vgpu train mpi-probe`")
    detail = run.workload_detail
    busbw: dict[str, float] = {}
    time_us: dict[str, float] = {}
    for metric in store.metrics(run_id):
        if metric.instance is None:
            continue
        if metric.name == "busbw":
            busbw[metric.instance] = metric.value
        elif metric.name == "time_us":
            time_us[metric.instance] = metric.value
    platform = run.platform
    speed = platform.link_speed_gbps if platform else None
    return RuntimeProbe(
        run_id=run_id, backend=str(detail.get("backend", "?")),
        world_size=int(detail.get("world_size") or 0), nodes=int(detail.get("nodes") or 1),
        link_speed_gbps=speed, link=link_label(speed, platform.rdma if platform else None),
        sizes_bytes=tuple(int(s) for s in detail.get("sizes_bytes", [])),
        busbw=busbw, time_us=time_us, scenario_id=run.scenario_id,
        target_kind=run.target_kind)


def _newest_per_runtime(store: ResultStore, scenario_id: str | None) -> dict[str, list[int]]:
    """Scenario id -> the newest ok probe of each runtime (run ids, ascending)."""
    newest: dict[str, dict[str, int]] = {}
    for run in store.runs(scenario_id=scenario_id, kind=PROBE_KIND, status="ok"):
        newest.setdefault(run.scenario_id, {})[str(run.workload_detail.get("backend"))] = \
            run.id
    return {scenario: sorted(ids.values()) for scenario, ids in newest.items()}


def latest_per_runtime(store: ResultStore, scenario_id: str) -> list[int]:
    """The newest stored probe of each runtime for the scenario."""
    newest = _newest_per_runtime(store, scenario_id).get(scenario_id, [])
    if not newest:
        raise InputError.single("results store", "--scenario", f"no allreduce probe of "
                                f"scenario '{scenario_id}' is stored",
                                fix="run `vgpu train probe` and `vgpu train mpi-probe` first")
    return newest


def runtimes_by_scenario(store: ResultStore) -> dict[str, list[RuntimeProbe]]:
    """Each scenario whose stored probes span more than one runtime: the newest probe of
    each runtime, oldest first (what `vgpu report` sets side by side)."""
    return {scenario: [load_probe(store, run_id) for run_id in ids]
            for scenario, ids in sorted(_newest_per_runtime(store, None).items())
            if len(ids) > 1}


def message_sizes(probes: Sequence[RuntimeProbe]) -> list[int]:
    """Every message size any of the probes measured, ascending."""
    return sorted({size for probe in probes for size in probe.sizes_bytes})


def render_runtimes(probes: Sequence[RuntimeProbe]) -> str:
    """Allreduce by message size, one busbw / time column pair per probe."""
    sizes = message_sizes(probes)
    width = max(24, *(len(p.title) for p in probes))
    header = "size     " + "".join(f"{p.title:>{width}}" for p in probes)
    sub = "         " + "".join(f"{'busbw GB/s    time us':>{width}}" for _ in probes)
    lines = [header, sub]
    for size in sizes:
        label = size_label(size)
        cells = "".join(f"{_cell(p, label):>{width}}" for p in probes)
        lines.append(f"{label:<9}{cells}")
    lines.append("")
    for probe in probes:
        share = probe.link_share
        shown = "-" if share is None else f"{share * 100:.1f}% of the link"
        lines.append(f"{probe.title}: link {probe.link}; peak busbw {shown}")
    return "\n".join(lines)


def _cell(probe: RuntimeProbe, label: str) -> str:
    if label not in probe.time_us:
        return "-"
    busbw = probe.busbw.get(label)
    shown = "n/a" if busbw is None else f"{busbw:.4f}"
    return f"{shown}  {probe.time_us[label]:>10.1f}"

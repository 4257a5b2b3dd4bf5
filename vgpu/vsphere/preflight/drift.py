"""Drift: what changed on the vCenter hosts between a saved preflight and a new one.

Pure: the saved report (its JSON, as ``save_report`` wrote it) and the new report in, rows
out. A row is breaking when the change stops the scenario from running as planned: a vGPU
type it uses is no longer offered, a GPU is gone, a host (or the scenario) now fails a check
it passed (the driver branch check among them), a GPU left Shared Direct. Everything else (a
new build, a new VIB on a compatible branch, types added, a reboot pending or done, another
hardware UUID, the vCenter version, a GPU's vGPU or passthrough mode, the GPU assignment
policy, an advanced option that matters to GPU VMs) is shown and is not breaking.

``compute_drift`` is the entry point for any command that revalidates a lab."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from vgpu.model.vgpu_request import VgpuRequest
from vgpu.vsphere.preflight.checks import PreflightReport

NONE = "-"
SCENARIO_ROW = "scenario"
VCENTER_ROW = "vcenter"
SHARED_DIRECT = "sharedDirect"
CHECK_PREFIX = "check "
SHORT_DETAIL = 120


@dataclass(frozen=True)
class DriftRow:
    host: str
    field: str
    before: str
    after: str
    breaking: bool
    why: str = ""  # for a breaking row: what it breaks


@dataclass
class Drift:
    before_id: str | None
    rows: list[DriftRow]
    scenario_vgpu_types: list[str] = field(default_factory=list)
    after_id: str | None = None  # set once the new report is saved

    @property
    def breaking(self) -> bool:
        return any(r.breaking for r in self.rows)

    @property
    def changed(self) -> bool:
        return bool(self.rows)

    def to_json(self) -> dict[str, Any]:
        return {"before": self.before_id, "after": self.after_id, "breaking": self.breaking,
                "scenario_vgpu_types": self.scenario_vgpu_types,
                "rows": [asdict(r) for r in self.rows]}


def type_key(vgpu_type: str) -> str:
    """A vGPU type compared without case or host prefix: grid_a100d-1-10c == A100D-1-10C."""
    low = vgpu_type.strip().lower()
    for prefix in ("grid_", "nvidia_", "nvidia-"):
        if low.startswith(prefix):
            return low[len(prefix):]
    return low


def scenario_vgpu_types(requests: dict[str, list[VgpuRequest]]) -> set[str]:
    """Every vGPU type a scenario's requests may use, under each board code of its GPU."""
    out: set[str] = set()
    for reqs in requests.values():
        for r in reqs:
            out.update(t for board in r.gpu.board_codes if (t := r.vgpu_type(board)))
    return out


def _text(value: Any) -> str:
    if value is None or value == "":
        return NONE
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _short(detail: str) -> str:
    """A check's detail cut to its first line and SHORT_DETAIL characters (the full text
    is in the new report)."""
    first = str(detail).splitlines()[0] if detail else ""
    return first if len(first) <= SHORT_DETAIL else first[:SHORT_DETAIL - 3] + "..."


def _driver(host: dict[str, Any]) -> str:
    name, version = host.get("host_driver"), host.get("host_driver_version")
    return f"{name} {version}" if name else NONE


def _scalar_rows(name: str, before: dict[str, Any], after: dict[str, Any]) -> list[DriftRow]:
    fields = [("ESXi version", "version"), ("ESXi build", "build"),
              ("connection", "connection_state"), ("maintenance", "in_maintenance"),
              ("graphics default", "graphics_default_type"),
              ("GPU assignment policy", "assignment_policy"),
              ("reboot pending", "reboot_required"), ("boot time", "boot_time"),
              ("hardware UUID", "hardware_uuid")]
    rows = [DriftRow(name, label, _text(before.get(key)), _text(after.get(key)), False)
            for label, key in fields if _text(before.get(key)) != _text(after.get(key))]
    if _driver(before) != _driver(after):
        rows.append(DriftRow(name, "host driver", _driver(before), _driver(after), False))
    return rows


def _option_rows(name: str, before: dict[str, Any], after: dict[str, Any]) -> list[DriftRow]:
    """The advanced options both runs read whose value changed (a key only one run asked
    about, e.g. a scenario's, says nothing)."""
    old = before.get("advanced_options") or {}
    new = after.get("advanced_options") or {}
    return [DriftRow(name, f"advanced option {key}", _text(old[key]), _text(new[key]), False)
            for key in sorted(old) if key in new and _text(old[key]) != _text(new[key])]


def _type_rows(name: str, before: dict[str, Any], after: dict[str, Any],
               used: set[str]) -> list[DriftRow]:
    old = list(before.get("vgpu_types") or [])
    new = list(after.get("vgpu_types") or [])
    rows = []
    for gone in [t for t in old if t not in new]:
        breaking = type_key(gone) in used
        rows.append(DriftRow(name, "vGPU type removed", gone, NONE, breaking,
                             "the scenario uses it" if breaking else ""))
    added = [t for t in new if t not in old]
    if added:
        rows.append(DriftRow(name, "vGPU types added", NONE, ", ".join(added), False))
    return rows


def _gpus(host: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(g.get("pci_id")): g for g in host.get("gpus") or [] if isinstance(g, dict)}


def _gpu_rows(name: str, before: dict[str, Any], after: dict[str, Any]) -> list[DriftRow]:
    old, new = _gpus(before), _gpus(after)
    rows = []
    for pci in old:
        if pci not in new or new[pci].get("model") != old[pci].get("model"):
            rows.append(DriftRow(name, f"GPU {pci}", _text(old[pci].get("model")),
                                 _text(new.get(pci, {}).get("model") or "gone"), True,
                                 "a GPU the host had is gone"))
    rows += [DriftRow(name, f"GPU {pci}", "absent", _text(new[pci].get("model")), False)
             for pci in new if pci not in old]
    for pci in [p for p in old if p in new]:
        rows += [DriftRow(name, f"{label} GPU {pci}", _text(old[pci].get(key)),
                          _text(new[pci].get(key)), False)
                 for label, key in (("vGPU mode", "vgpu_mode"), ("passthrough", "passthrough"))
                 if _text(old[pci].get(key)) != _text(new[pci].get(key))]
        was, now = old[pci].get("graphics_type"), new[pci].get("graphics_type")
        if _text(was) != _text(now):
            breaking = was == SHARED_DIRECT
            rows.append(DriftRow(name, f"graphics type GPU {pci}", _text(was), _text(now),
                                 breaking, "the GPU left Shared Direct (no vGPU on it)"
                                 if breaking else ""))
    return rows


def _check_rows(where: str, before: list[dict[str, Any]],
                after: list[dict[str, Any]]) -> list[DriftRow]:
    """Checks that now fail (breaking) or now pass (shown)."""
    passed = {c.get("name"): bool(c.get("ok")) for c in before if isinstance(c, dict)}
    rows = []
    for check in after:
        was_ok = passed.get(check["name"], True)
        if was_ok and not check["ok"]:
            rows.append(DriftRow(where, f"{CHECK_PREFIX}{check['name']}", "ok",
                                 f"FAIL: {_short(check['detail'])}", True, "a check now fails"))
        elif not was_ok and check["ok"]:
            rows.append(DriftRow(where, f"{CHECK_PREFIX}{check['name']}", "FAIL",
                                 f"ok: {_short(check['detail'])}", False))
    return rows


def _host_rows(name: str, before: dict[str, Any] | None, after: dict[str, Any] | None,
               used: set[str]) -> list[DriftRow]:
    if before is None:
        return [DriftRow(name, "host", "not checked", "checked now", False)]
    if after is None:
        return [DriftRow(name, "host", "checked", "not checked now", False)]
    gone = after.get("connection_state") == "absent"
    if gone and before.get("connection_state") != "absent":
        return [DriftRow(name, "in vCenter", "present", "absent", True,
                         "the host and its GPUs are gone")]
    return [*_scalar_rows(name, before, after), *_option_rows(name, before, after),
            *_type_rows(name, before, after, used),
            *_gpu_rows(name, before, after),
            *_check_rows(name, before.get("checks") or [], after.get("checks") or [])]


def compute_drift(before: dict[str, Any], after: PreflightReport,
                  scenario_vgpu_types: set[str]) -> Drift:
    """Compare a saved preflight (its JSON) with a new one, host by host. A vGPU type
    counts as used by the scenario when it matches one of ``scenario_vgpu_types`` in any
    spelling (grid_a100d-1-10c, A100D-1-10C)."""
    used = {type_key(t) for t in scenario_vgpu_types}
    now = after.to_json()
    old_hosts = {h["name"]: h for h in before.get("hosts") or []}
    new_hosts = {h["name"]: h for h in now["hosts"]}
    rows: list[DriftRow] = []
    for name in [*new_hosts, *(n for n in old_hosts if n not in new_hosts)]:
        rows += _host_rows(name, old_hosts.get(name), new_hosts.get(name), used)
    if _text(before.get("vcenter_version")) != _text(now.get("vcenter_version")):
        rows.append(DriftRow(VCENTER_ROW, "vCenter version", _text(before.get("vcenter_version")),
                             _text(now.get("vcenter_version")), False))
    rows += _check_rows(SCENARIO_ROW, before.get("scenario_checks") or [],
                        now["scenario_checks"])
    return Drift(before_id=before.get("id"), rows=rows,
                 scenario_vgpu_types=sorted(scenario_vgpu_types))


def only_host(drift: Drift, host: str | None) -> Drift:
    """The drift of one host (and the scenario's own checks) when a run is pinned to it:
    the other hosts' changes say nothing about the host that was upgraded."""
    if host is None:
        return drift
    return replace(drift, rows=[r for r in drift.rows
                                if r.host in (host, SCENARIO_ROW, VCENTER_ROW)])

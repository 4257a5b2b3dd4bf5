"""Which baseline set a revalidation records and judges against, checked before anything
runs. A baseline measured on one ESXi host proves nothing about another: with --host H the
set is H's own ("pre-upgrade@H"), a set of another host is refused unless --other-host names
it, and an existing set is only overwritten with --replace."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from vgpu.errors import InputError, NoReference
from vgpu.results.store.result_store import ResultStore

HOST_MARK = "@"


def set_name(baseline: str, host: str | None) -> str:
    """The named baseline set of one ESXi host ("pre-upgrade@DC0_C0_H1"), or the plain
    set when no host is pinned."""
    return f"{baseline}{HOST_MARK}{host}" if host else baseline


def tie_drain_facts(db: str, host: str, hardware_uuid: str | None,
                    facts_id: str) -> list[str]:
    """Every baseline set in store ``db`` measured on ``host`` (by its hardware UUID where
    both have one, so a host re-added under another name keeps its baselines) gets the
    facts saved at its drain as its pre-upgrade ones. Returns the sets' names."""
    tied = []
    with ResultStore.open_existing(db) as store:
        for record in store.baseline_sets():
            same = record.hardware_uuid == hardware_uuid if record.hardware_uuid \
                and hardware_uuid else record.host == host
            if same:
                store.put_baseline_set(replace(record, drain_facts_id=facts_id))
                tied.append(record.name)
    return tied


def scenarios_in_set(store: ResultStore, name: str) -> list[str]:
    """The scenario ids a named baseline set holds, in id order."""
    prefix = f"{name}:"
    return sorted({b.name[len(prefix):].split(":")[0] for b in store.baselines()
                   if b.name.startswith(prefix) and b.name.count(":") >= 2})


def hosts_with_set(store: ResultStore, baseline: str) -> list[str]:
    """The hosts that have their own set of ``baseline``."""
    prefix = f"{baseline}{HOST_MARK}"
    names = {b.name.split(":")[0] for b in store.baselines() if b.name.startswith(prefix)}
    return sorted(n[len(prefix):] for n in names)


@dataclass(frozen=True)
class BaselineChoice:
    """The set this run records into (with --capture-baseline) and the one it is judged
    against (another host's with --other-host)."""

    recorded: str
    judged: str
    host: str | None = None
    other_host: str | None = None
    # the host's former name, when its own set was found by its hardware UUID (a host
    # reinstalled and added to vCenter again under another name is the same machine)
    renamed_from: str | None = None

    @property
    def across_hosts(self) -> bool:
        """--other-host was given: judged against a baseline of another host, or of the
        same host name on another machine (hardware UUID)."""
        return self.other_host is not None


def choose_baseline(store: ResultStore | None, baseline: str, host: str | None,
                    other_host: str | None, capture: bool, replace: bool,
                    scenario_ids: Sequence[str],
                    host_uuid: Callable[[], str | None] | None = None) -> BaselineChoice:
    """The sets to use, or InputError (exit 2, nothing run) naming the flag to change.
    ``store`` None: no results store exists yet (nothing recorded, nothing to judge).
    With --host (not capturing, no --other-host) the host's own set must hold every
    scenario: it is found by name, else by the host's hardware UUID (``host_uuid`` reads
    it from vCenter); NoReference (exit 5, nothing run) when it is not there."""
    if HOST_MARK in baseline or ":" in baseline:
        raise InputError.single("command line", "--baseline",
                                f"'{baseline}' has '{HOST_MARK}' or ':' in it",
                                fix="name it without them (--host picks a host's own set)")
    if other_host is not None and host is None:
        raise InputError.single("command line", "--other-host",
                                "--other-host judges a pinned host's run against another "
                                "host's baseline; no --host was given",
                                fix="pass --host HOST too")
    if other_host is not None and capture:
        raise InputError.single("command line", "--other-host",
                                "a baseline is recorded for the host it ran on",
                                fix="drop --other-host when capturing")
    choice = BaselineChoice(set_name(baseline, host), set_name(baseline, other_host or host),
                            host, other_host)
    if capture:
        if store is not None:
            _refuse_overwrite(store, choice.recorded, replace, scenario_ids)
        return choice
    if host is not None and other_host is None:
        return _own_set(store, baseline, choice, scenario_ids, host_uuid)
    return choice


def _own_set(store: ResultStore | None, baseline: str, choice: BaselineChoice,
             scenario_ids: Sequence[str],
             host_uuid: Callable[[], str | None] | None) -> BaselineChoice:
    """The pinned host's own set (by name, else by hardware UUID), holding every scenario;
    NoReference naming what is missing and how to get it."""
    host = choice.host or ""
    held = scenarios_in_set(store, choice.judged) if store is not None else []
    missing = [s for s in scenario_ids if s not in held]
    if not missing:
        return choice
    uuid = host_uuid() if host_uuid is not None and store is not None else None
    if uuid and store is not None:
        for record in store.baseline_sets():
            if record.hardware_uuid == uuid and record.host not in (None, host) \
                    and record.name == set_name(baseline, record.host) \
                    and all(s in scenarios_in_set(store, record.name) for s in missing):
                return BaselineChoice(choice.recorded, record.name, host,
                                      renamed_from=record.host)
    others = [h for h in (hosts_with_set(store, baseline) if store is not None else [])
              if h != host and any(s in scenarios_in_set(store, set_name(baseline, h))
                                   for s in missing)] if store is not None else []
    elsewhere = (f"; host(s) {', '.join(others)} have one, and a comparison across hosts is "
                 "not the same measurement") if others else ""
    across = f", or judge against another host's with --other-host {others[0]}" \
        if others else ""
    raise NoReference(
        f"no baseline '{baseline}' of scenario(s) {', '.join(missing)} was captured on host "
        f"{host} (nor on a host with its hardware UUID){elsewhere}: nothing to judge the "
        f"upgrade against, nothing was run. Fix: capture one on {host} before its upgrade "
        f"(--capture-baseline --host {host}){across}")


def _refuse_overwrite(store: ResultStore, name: str, replace: bool,
                      scenario_ids: Sequence[str]) -> None:
    held = [s for s in scenario_ids if s in scenarios_in_set(store, name)]
    if held and not replace:
        raise InputError.single(
            "command line", "--capture-baseline",
            f"baseline '{name}' in {store.path} already holds scenario(s) "
            f"{', '.join(held)}; capturing would overwrite the pre-upgrade measurement",
            fix="pass --replace to record a new one, or --baseline NAME for another set")

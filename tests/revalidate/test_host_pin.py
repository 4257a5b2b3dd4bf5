"""The pieces of a host-pinned revalidation that need no lab: the planner's host pin, the
baseline set a run records and is judged against (and what is refused), the drift of one
host, and undrain's decision whether an upgrade took."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.placement.lab_model import inventory, scenario
from vgpu.errors import InputError, NoReference, PlanError
from vgpu.planner import HeldVgpu, build_plan
from vgpu.results.store.records import BaselineSet, RunStart
from vgpu.results.store.result_store import ResultStore
from vgpu.revalidate.flow import baseline_key
from vgpu.revalidate.hosts import choose_baseline, scenarios_in_set, set_name, tie_drain_facts
from vgpu.revalidate.preflight import HostPin, check_pinned_host
from vgpu.vsphere.apply.window import upgrade_refusals
from vgpu.vsphere.desired.drainrecord import DrainRecord
from vgpu.vsphere.preflight.checks import HostReport, PreflightReport
from vgpu.vsphere.preflight.drift import Drift, DriftRow, only_host
from vgpu.vsphere.read.facts import HostDriver, HostFacts

ONE_1G = [{"name": "a", "vgpus": ["nvidia-1-10c"]}]


def test_the_pin_puts_every_vm_on_the_named_host_not_the_first_that_fits() -> None:
    two = scenario([{"name": "a", "count": 2, "vgpus": ["nvidia-1-10c"]}])
    assert {vm.host for vm in build_plan(two, inventory()).vms} == {"h1"}
    assert {vm.host for vm in build_plan(two, inventory(), pin_host="h2").vms} == {"h2"}


def test_a_pinned_host_in_maintenance_is_refused_with_the_undrain_fix() -> None:
    with pytest.raises(PlanError) as caught:
        build_plan(scenario(ONE_1G), inventory(), pin_host="h2",
                   unavailable={"h2": "in maintenance mode"})
    [problem] = caught.value.problems
    assert problem.field == "--host" and "h2 is in maintenance mode" in problem.message
    assert "vgpu undrain --host h2" in (problem.fix or "")


def test_a_pin_that_does_not_fit_names_what_is_in_the_way() -> None:
    held = [HeldVgpu("h2", 0, "someone-elses-vm", "mig", "7g.80gb")]
    with pytest.raises(PlanError) as caught:
        build_plan(scenario(ONE_1G), inventory(), held=held, pin_host="h2")
    message = str(caught.value)
    assert "no room for VM a" in message and "on host h2" in message
    assert "someone-elses-vm (7g.80gb on h2 GPU 0)" in message


def test_an_unknown_pin_or_a_group_pinned_elsewhere_is_refused() -> None:
    with pytest.raises(PlanError, match="host h9 is not a A100-80GB host"):
        build_plan(scenario(ONE_1G), inventory(), pin_host="h9")
    with pytest.raises(PlanError, match="name another host than --host h2"):
        build_plan(scenario([{**ONE_1G[0], "host": "h1"}]), inventory(), pin_host="h2")


def _store_with(tmp_path: Path, names: list[str]) -> ResultStore:
    store = ResultStore.open(tmp_path / "r.db")
    for name in names:
        run_id = store.begin_run(RunStart("series-" + name, "5", "s", "w", "vm"))
        store.finish_run(run_id, "ok")
        store.set_baseline(run_id, baseline_key(name, "5", "w"))
    return store


def test_each_host_has_its_own_set_and_another_hosts_is_refused(tmp_path: Path) -> None:
    with _store_with(tmp_path, ["pre-upgrade@H0"]) as store:
        assert scenarios_in_set(store, set_name("pre-upgrade", "H0")) == ["5"]
        with pytest.raises(NoReference) as caught:
            choose_baseline(store, "pre-upgrade", "H1", None, False, False, ["5"])
        assert caught.value.exit_code == 5  # nothing to judge against: nothing is run
        assert "H0 have one" in str(caught.value) and "--other-host H0" in str(caught.value)
        assert "--capture-baseline --host H1" in str(caught.value)
        across = choose_baseline(store, "pre-upgrade", "H1", "H0", False, False, ["5"])
        assert (across.recorded, across.judged, across.across_hosts) == (
            "pre-upgrade@H1", "pre-upgrade@H0", True)
        # A capture on H1 is its own set: H0's is not overwritten.
        capture = choose_baseline(store, "pre-upgrade", "H1", None, True, False, ["5"])
        assert capture.recorded == "pre-upgrade@H1"


def test_a_host_readded_under_another_name_keeps_its_baseline_by_hardware_uuid(
        tmp_path: Path) -> None:
    with _store_with(tmp_path, ["pre-upgrade@esx7"]) as store:
        store.put_baseline_set(BaselineSet("pre-upgrade@esx7", "esx7", "uuid-7", "pf",
                                           time.time()))
        found = choose_baseline(store, "pre-upgrade", "esx7.lab.example", None, False, False,
                                ["5"], host_uuid=lambda: "uuid-7")
        assert (found.judged, found.renamed_from) == ("pre-upgrade@esx7", "esx7")
        assert found.recorded == "pre-upgrade@esx7.lab.example"
        with pytest.raises(NoReference):  # another machine under a new name: no baseline
            choose_baseline(store, "pre-upgrade", "esx8", None, False, False, ["5"],
                            host_uuid=lambda: "uuid-8")
        with pytest.raises(NoReference):  # no store at all: nothing to judge against
            choose_baseline(None, "pre-upgrade", "esx7", None, False, False, ["5"])


def test_a_capture_never_overwrites_a_baseline_without_replace(tmp_path: Path) -> None:
    with _store_with(tmp_path, ["pre-upgrade"]) as store:
        with pytest.raises(InputError) as caught:
            choose_baseline(store, "pre-upgrade", None, None, True, False, ["5"])
        assert caught.value.exit_code == 2 and "pass --replace" in str(caught.value)
        assert choose_baseline(store, "pre-upgrade", None, None, True, True, ["5"]) \
            .recorded == "pre-upgrade"
        assert choose_baseline(store, "pre-upgrade", None, None, True, False, ["4"]) \
            .recorded == "pre-upgrade"


@pytest.mark.parametrize("args, flag", [
    (("pre@x", None, None, False), "--baseline"),
    (("pre-upgrade", None, "H0", False), "--other-host"),
    (("pre-upgrade", "H1", "H0", True), "--other-host"),
])
def test_bad_flag_combinations_are_input_errors(args: tuple[Any, ...], flag: str) -> None:
    name, host, other, capture = args
    with pytest.raises(InputError) as caught:
        choose_baseline(None, name, host, other, capture, False, [])
    assert caught.value.problems[0].field == flag


def test_a_baseline_set_records_its_host_and_the_drains_facts(tmp_path: Path) -> None:
    with ResultStore.open(tmp_path / "r.db") as store:
        store.put_baseline_set(BaselineSet("pre-upgrade@H1", "H1", "uuid-1", "pf-capture",
                                           time.time()))
        first = store.baseline_set("pre-upgrade@H1")
        assert first is not None and first.pre_upgrade_facts_id == "pf-capture"
        from dataclasses import replace
        store.put_baseline_set(replace(first, drain_facts_id="pf-drain"))
        again = store.baseline_set("pre-upgrade@H1")
        assert again is not None and again.pre_upgrade_facts_id == "pf-drain"
        assert (again.host, again.hardware_uuid) == ("H1", "uuid-1")
        assert store.baseline_set("pre-upgrade@H0") is None


def test_a_drain_ties_the_sets_of_its_host_by_hardware_uuid_else_by_name(
        tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    with ResultStore.open(db) as store:
        store.put_baseline_set(BaselineSet("pre@old-name", "old-name", "uuid-1", "pf-a", 1.0))
        store.put_baseline_set(BaselineSet("pre@H1", "H1", None, "pf-b", 1.0))
        store.put_baseline_set(BaselineSet("pre@H2", "H2", "uuid-2", "pf-c", 1.0))
    tied = tie_drain_facts(str(db), "H1", "uuid-1", "pf-drain")
    assert sorted(tied) == ["pre@H1", "pre@old-name"]
    with ResultStore.open(db) as store:
        facts = {name: getattr(store.baseline_set(name), "pre_upgrade_facts_id", None)
                 for name in ("pre@old-name", "pre@H1", "pre@H2")}
    assert facts == {"pre@old-name": "pf-drain", "pre@H1": "pf-drain", "pre@H2": "pf-c"}


def test_the_drift_of_a_pinned_host_leaves_the_other_hosts_out() -> None:
    drift = Drift("before", [DriftRow("H0", "boot time", "a", "b", False),
                             DriftRow("H1", "ESXi build", "1", "2", False),
                             DriftRow("vcenter", "vCenter version", "8.0.2", "8.0.3", False),
                             DriftRow("scenario", "check fits", "ok", "FAIL", True)])
    assert [r.host for r in only_host(drift, "H1").rows] == ["H1", "vcenter", "scenario"]
    assert only_host(drift, None) is drift


def _facts(**changes: Any) -> HostFacts:
    base: dict[str, Any] = dict(
        name="H1", connection_state="connected", in_maintenance=True, version="8.0.2",
        build="24022510", full_name=None, gpus=[], vgpu_types=[], graphics_default_type=None,
        host_driver=HostDriver("NVD-AIE_ESXi_8.0.0_Driver", "550.90.05", "NVD"),
        reboot_required=False, boot_time="2026-11-26T09:00:00Z")
    return HostFacts(**{**base, **changes})


DRAINED = DrainRecord(host="H1", inventory="lab.yaml", drained_at="2026-11-26T08:00:00Z",
                      facts_id="pf-1", hardware_uuid="u", boot_time="2026-11-20T00:00:00Z",
                      esxi_build="22380479", host_driver="NVD-AIE_ESXi_8.0.0_Driver 535.161.05")


def test_undrain_accepts_a_host_booted_into_a_new_build_and_driver() -> None:
    assert upgrade_refusals(DRAINED, _facts(), expect_upgrade=True) == []


def test_undrain_refuses_a_pending_reboot_a_host_not_rebooted_or_not_upgraded() -> None:
    [pending] = upgrade_refusals(DRAINED, _facts(reboot_required=True), True)
    assert "reboot pending" in pending.reason and "reboot H1" in pending.fix
    [not_booted] = upgrade_refusals(DRAINED, _facts(boot_time=DRAINED.boot_time), True)
    assert "has not booted since the drain" in not_booted.reason
    same = _facts(build="22380479", host_driver=HostDriver("NVD-AIE_ESXi_8.0.0_Driver",
                                                           "535.161.05", "NVD"))
    [unchanged] = upgrade_refusals(DRAINED, same, True)
    assert "the upgrade did not take" in unchanged.reason
    assert upgrade_refusals(DRAINED, same, expect_upgrade=False) == []
    # a reboot still pending refuses even when no upgrade is expected
    assert upgrade_refusals(DRAINED, _facts(reboot_required=True), False)


def _report(**host: Any) -> PreflightReport:
    fields: dict[str, Any] = dict(name="H1", version="8.0.2", build="1",
                                  connection_state="connected", in_maintenance=False,
                                  graphics_default_type=None, gpus=[], vgpu_types=[],
                                  mig_types=[], checks=[], hardware_uuid="uuid-now")
    return PreflightReport("vc", "8.0", "lab.yaml", None, "now",
                           [HostReport(**{**fields, **host})])


def test_a_pinned_host_must_be_present_out_of_maintenance_and_the_same_machine() -> None:
    same = HostPin("H1", False, "pf-1", "uuid-now", "pre-upgrade@H1")
    assert check_pinned_host(same, _report()) == "uuid-now"
    with pytest.raises(InputError, match="vgpu undrain --host H1"):
        check_pinned_host(same, _report(in_maintenance=True))
    with pytest.raises(InputError, match="not among the inventory's hosts"):
        check_pinned_host(same, _report(name="H0"))
    replaced = HostPin("H1", False, "pf-1", "uuid-before", "pre-upgrade@H1")
    with pytest.raises(InputError) as caught:
        check_pinned_host(replaced, _report())
    assert "another machine" in str(caught.value) and "--other-host H1" in str(caught.value)
    asked = HostPin("H1", True, "pf-1", "uuid-before", "pre-upgrade@H1")
    assert check_pinned_host(asked, _report()) == "uuid-now"

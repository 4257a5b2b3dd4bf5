"""A host is its hardware UUID; its name is a label. On the simulated vCenter: a baseline
set is re-tied to the UUID a host reports now only when asked (`vgpu baseline remap`),
and a revalidation of a host re-added under another name finds its baseline by UUID."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.cli.invoke import run_cli
from tests.labs.vcsim import VcsimLab, lab_available
from vgpu.model.inventory import Inventory
from vgpu.model.load import load_inventory
from vgpu.results.store.records import BaselineSet
from vgpu.results.store.result_store import ResultStore
from vgpu.revalidate.hosts import choose_baseline
from vgpu.sim.lab import LabShape
from vgpu.vsphere.connect.hostid import host_uuid

pytestmark = [pytest.mark.vcsim,
              pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))]

H1 = "DC0_C0_H1"
H1_UUID = "4c4c4544-0056-4710-8047-000000000001"  # main.go: one UUID per host index


def test_remap_ties_a_set_to_the_uuid_vcenter_reports_and_says_both(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    with ResultStore.open(db) as store:
        store.put_baseline_set(BaselineSet(f"pre-upgrade@{H1}", H1, "uuid-of-the-old-board",
                                           "pf", time.time()))
    with VcsimLab(LabShape(hosts=2, gpus_per_host=1)) as lab:
        inventory = lab.write_inventory(tmp_path / "inv.yaml")
        assert host_uuid(lab_inventory(inventory), inventory, H1) == H1_UUID
        code, out, err = run_cli(["baseline", "remap", f"pre-upgrade@{H1}", "-i",
                                  str(inventory), "--db", str(db)])
        assert code == 0, err
        assert f"uuid-of-the-old-board -> {H1_UUID} (host {H1}" in " ".join(out.split())
        code, _, err = run_cli(["baseline", "remap", "pre-upgrade@nowhere", "-i",
                                str(inventory), "--db", str(db)])
        assert code == 2 and f"name one of: pre-upgrade@{H1}" in err
    with ResultStore.open_existing(str(db)) as store:
        record = store.baseline_set(f"pre-upgrade@{H1}")
        assert record is not None and record.hardware_uuid == H1_UUID
        # The same machine re-added as an FQDN finds this set by its UUID.
        store.set_baseline(_a_run(store), f"pre-upgrade@{H1}:5:w")
        found = choose_baseline(store, "pre-upgrade", "esx1.lab.example", None, False, False,
                                ["5"], host_uuid=lambda: H1_UUID)
        assert (found.judged, found.renamed_from) == (f"pre-upgrade@{H1}", H1)


def lab_inventory(path: Path) -> Inventory:
    return load_inventory(path)


def _a_run(store: ResultStore) -> int:
    from vgpu.results.store.records import RunStart

    run_id = store.begin_run(RunStart("series-x", "5", "s", "w", "vm"))
    store.finish_run(run_id, "ok")
    return run_id

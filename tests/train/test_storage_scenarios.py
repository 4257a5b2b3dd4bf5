"""Study D in the catalogue and on this machine: the file-fed scenarios, the storage a run
read from (from /proc/mounts), and `vgpu bench` printing what fed the run and its bound."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from vgpu import catalog
from vgpu.cli.train_view import input_summary
from vgpu.errors import InputError
from vgpu.model.scenario import TrainingWorkload
from vgpu.results.store.result_store import ResultStore
from vgpu.train.scenario_runner import _data_spec
from vgpu.train.storage import storage_of

ROOT = Path(__file__).resolve().parents[2]
MOUNTS = """\
/dev/vda / ext4 rw,relatime 0 0
tmpfs /tmp tmpfs rw 0 0
nas:/export/imagenet /mnt/vgpu\\040data nfs4 rw,vers=4.2 0 0
/dev/loop3 /mnt/vgpu\\040data/local ext4 rw 0 0
"""


@pytest.mark.parametrize(("path", "kind", "mount"), [
    ("/mnt/vgpu data/imagenet", "nfs", "nas:/export/imagenet on /mnt/vgpu data type nfs4"),
    ("/mnt/vgpu data/local/set", "loop device (ext4)",
     "/dev/loop3 on /mnt/vgpu data/local type ext4"),
    ("/tmp/set", "memory (tmpfs)", "tmpfs on /tmp type tmpfs"),
    ("/root/set", "local disk (ext4)", "/dev/vda on / type ext4"),
    ("/tmpfoo/set", "local disk (ext4)", "/dev/vda on / type ext4"),
    ("http://10.0.0.5:8080/set", "http", "10.0.0.5:8080"),
])
def test_storage_is_the_longest_mount_holding_the_path(path: str, kind: str,
                                                       mount: str) -> None:
    storage = storage_of(path, MOUNTS)
    assert (storage.kind, storage.mount) == (kind, mount)


def test_study_d_scenarios_and_their_bare_metal_twins() -> None:
    ids = {e.id for e in catalog.catalogue()}
    for nodes in (1, 2, 4):
        assert {f"train_storage_{nodes}", f"train_storage_bm_{nodes}"} <= ids
        vm = catalog.load(f"train_storage_{nodes}")
        bm = catalog.load(f"train_storage_bm_{nodes}")
        assert vm.baseline is not None and vm.baseline.scenario == f"train_storage_bm_{nodes}"
        for scenario in (vm, bm):
            (workload,) = scenario.workloads
            assert isinstance(workload, TrainingWorkload)
            assert workload.nodes == nodes and workload.data.source == "files"


def test_files_on_nodes_need_a_path() -> None:
    workload = TrainingWorkload(data={"source": "files"})
    with pytest.raises(InputError) as caught:
        _data_spec(workload, local=False, procs=1, source="s.yaml", where="workloads[0]",
                   notes=[])
    assert "workloads[0].data.path" in str(caught.value)
    assert "vgpu data make" in str(caught.value)


def test_synthetic_workloads_keep_the_synthetic_spec() -> None:
    spec = _data_spec(TrainingWorkload(), local=True, procs=4, source="s", where="w",
                      notes=[])
    assert spec.source == "synthetic" and spec.path is None


def test_summary_line_names_the_bound_and_an_unmeasured_gpu() -> None:
    record = {"status": "ok", "totals": {"images_per_s": 412.5}, "input": {
        "input_mb_per_s": 45.25, "read_share": 0.8, "decode_share": 0.2, "workers": 2,
        "worker_cpu_utilisation": 0.3, "data_wait_share": 0.6, "gpu_utilisation_pct": None,
        "gpu_utilisation_note": "no GPU: not measured", "page_cache": "cache-warm possible",
        "bound": "storage", "bound_note": ""}}
    line = input_summary(record)
    assert line is not None
    assert line.startswith("412.5 images/s from files, input 45.2 MB/s")
    assert "80% of their time reading, 20% decoding" in line
    assert "GPU utilisation not measured (no GPU: not measured)" in line
    assert line.endswith("bound: storage")
    assert input_summary({"status": "ok", "totals": {}}) is None


@pytest.mark.slow
@pytest.mark.train
def test_bench_of_the_one_node_study_d_scenario_runs_from_files(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the train extra (torch) is not installed")
    text = (ROOT / "scenarios" / "train_storage_1.yaml").read_text()
    scenario = tmp_path / "train_storage_1.yaml"
    scenario.write_text(text.replace("images: 2000", "images: 64"))
    env = {**os.environ, "VGPU_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "250",
           "VGPU_INVENTORY": "none"}
    done = subprocess.run([sys.executable, "-m", "vgpu", "bench", str(scenario), "--runs",
                           "1", "--db", str(tmp_path / "r.db")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    out = " ".join(done.stdout.split())
    assert "images/s from files, input" in out and "MB/s" in out
    assert "GPU utilisation not measured" in out
    assert "bound: " in out
    assert f"made {tmp_path / 'cache' / 'datasets' / 'small-64-x1-seed0'}" in out
    with ResultStore.open(tmp_path / "r.db") as store:
        (run,) = store.runs()
        assert run.platform is not None and run.platform.storage_kind is not None
        names = {m.name for m in store.metrics(run.id)}
        assert {"input_mb_per_s", "decode_share", "worker_cpu_utilisation"} <= names
        assert "gpu_utilisation_pct" not in names
        (instance,) = store.instances(run.id)
        assert instance.result.result["job_input"]["bound"] in ("compute", "decode", "storage")

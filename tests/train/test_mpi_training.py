"""MPI as the training runtime on this machine: real mpirun ranks (Open MPI, mpi4py) train a
tiny ResNet with gradients averaged Horovod-style, 2 and 4 of them, stored with their
runtime; threads x ranks above the cores is warned of."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

pytest.importorskip("torch", reason="the train extra (torch) is not installed")
pytest.importorskip("mpi4py", reason="the mpi extra (mpi4py) is not installed")

from vgpu.errors import InputError
from vgpu.model import load_scenario
from vgpu.results.store.result_store import ResultStore
from vgpu.train.mpi_plan import oversubscription, threads_per_rank
from vgpu.train.scenario_runner import Overrides, run_training_scenario

REPO = Path(__file__).resolve().parents[2]
TINY = Overrides(batch_per_gpu=4, image_size=16, model="resnet-tiny", steps=3, warmup_steps=1)


def _scenario(tmp_path: Path, **workload: object) -> Path:
    data = yaml.safe_load((REPO / "scenarios" / "train_mpi_2.yaml").read_text())
    data["workloads"][0].update(workload)
    path = tmp_path / "mpi.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_threads_default_to_the_cores_shared_out_and_excess_is_named() -> None:
    assert threads_per_rank(None, 4, 32) == 8 and threads_per_rank(3, 4, 32) == 3
    assert threads_per_rank(None, 4, 2) == 1
    assert oversubscription("n1", 2, 16, 32) is None
    warning = oversubscription("n1", 4, 16, 32)
    assert warning is not None and "4 ranks x 16 threads = 64 threads on 32 cores" in warning
    assert "threads_per_rank to 8" in warning


@pytest.mark.parametrize(("workload", "field"), [
    ({"comm_backend": "gloo"}, "ranks_per_node and threads_per_rank are settings of "
                               "comm_backend mpi"),
    ({"data": {"source": "files"}}, "comm_backend mpi trains on synthetic data only"),
])
def test_mpi_settings_are_checked_at_load(tmp_path: Path, workload: dict[str, object],
                                          field: str) -> None:
    with pytest.raises(InputError, match=field) as caught:
        load_scenario(_scenario(tmp_path, **workload))
    assert "mpi.yaml" in str(caught.value)


@pytest.mark.train
@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI (mpirun) is missing: "
                    "run `bash scripts/setup.sh --test`")
@pytest.mark.parametrize(("nodes", "ranks"), [(1, 2), (2, 2)])
def test_mpi_training_runs_and_is_stored_with_its_runtime(
    tmp_path: Path, nodes: int, ranks: int,
) -> None:
    scenario = load_scenario(_scenario(tmp_path, nodes=nodes, ranks_per_node=ranks,
                                       threads_per_rank=1))
    with ResultStore.open(tmp_path / "results.db") as store:
        (run,) = run_training_scenario(scenario, None, tmp_path / "out", store=store,
                                       overrides=TINY)
        stored = store.run(run.run_id or 0)
    record = run.record
    assert record["status"] == "ok", record.get("reason")
    assert record["backend"] == "mpi" and record["world_size"] == nodes * ranks
    assert record["totals"]["params_in_sync"] is True
    assert record["settings"]["ranks_per_node"] == nodes * ranks  # one machine hosts all
    assert record["settings"]["omp_num_threads"] == "1"
    assert "Open MPI" in record["settings"]["mpi_library"]
    assert 0 < record["communication"]["share_mean"] < 1  # averaging over MPI costs time
    assert stored is not None and stored.workload_detail["backend"] == "mpi"
    assert stored.workload_detail["threads_per_rank"] == 1
    assert any("mpirun on this machine" in note for note in run.notes)

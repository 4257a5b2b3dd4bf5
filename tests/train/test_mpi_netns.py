"""MPI across real, shaped links: two namespace-lab nodes, mpirun on this machine starting
ranks in each; the probe's point-to-point bandwidth and allreduce busbw follow the link,
and a training workload over MPI runs its ranks on both nodes."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

pytest.importorskip("mpi4py", reason="the mpi extra (mpi4py) is not installed")

from tests.labs.netns import NetnsLab, netns_available
from tests.train.labnodes import link_scenario
from tests.train.mpi_lab import lab_cidr, netns_mpi_nodes, netns_rsh_agent
from vgpu.errors import RemoteError
from vgpu.model import load_scenario
from vgpu.model.scenario import TrainingWorkload
from vgpu.results.store.result_store import ResultStore
from vgpu.train.mpi_plan import mpi_training_job
from vgpu.train.mpi_probe import MpiProbeSettings, run_mpi_probe
from vgpu.train.mpirun import run_mpi_job
from vgpu.train.scenario_runner import Overrides, prepare_launch

_UNAVAILABLE = netns_available() or (
    None if shutil.which("mpirun") else "Open MPI (mpirun) is missing")
pytestmark = [pytest.mark.mpi, pytest.mark.slow,
              pytest.mark.skipif(_UNAVAILABLE is not None, reason=str(_UNAVAILABLE))]

MBIT = 400
MIB = 1 << 20


def test_mpi_probe_across_a_shaped_link_follows_it(tmp_path: Path) -> None:
    with NetnsLab(2) as net:
        net.shape_all(MBIT)
        launcher, nodes = netns_mpi_nodes(net, tmp_path / "work")
        settings = MpiProbeSettings(
            sizes_bytes=(1024, MIB), iterations=5, large_iterations=10,
            launcher=launcher, rsh_agent=str(netns_rsh_agent(net, tmp_path)),
            interface=lab_cidr(net))
        with ResultStore.open(tmp_path / "results.db") as store:
            run = run_mpi_probe(link_scenario(tmp_path, MBIT), nodes, tmp_path / "out",
                                store=store, target_kind="bare-metal", settings=settings)
            metrics = {(m.name, m.instance): m.value for m in store.metrics(run.run_id or 0)}
    record = run.record
    assert (record["world_size"], record["nodes"], record["pt2pt_crosses_nodes"]) == (2, 2, True)
    link_gb_s = MBIT / 8 / 1000
    # a 1 MiB message: the link's rate within 25% (tbf's bucket lets a little burst through)
    assert metrics[("p2p_bw", "1MiB")] == pytest.approx(link_gb_s, rel=0.25)
    # Open MPI 4.1's allreduce of two ranks reduces, then broadcasts: each byte crosses
    # the link twice in turn, so its busbw is about half the link (Gloo's ring: all of it).
    # A busy machine slows the ranks' TCP progress (0.34-0.40 of the link seen under load),
    # so the floor only tells "follows the shaped link" from a starved or unshaped run.
    busbw = metrics[("busbw", "1MiB")]
    assert 0.25 * link_gb_s < busbw < 1.25 * link_gb_s
    assert metrics[("busbw_link_share", None)] == pytest.approx(
        max(busbw, metrics[("busbw", "1KiB")]) / link_gb_s)
    assert metrics[("latency_us", "1KiB")] > 0


def test_mpi_training_runs_its_ranks_on_both_nodes(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the train extra (torch) is not installed")
    data = yaml.safe_load((Path(__file__).parents[2] / "scenarios" / "train_mpi_2.yaml")
                          .read_text())
    data["workloads"][0].update(ranks_per_node=1, threads_per_rank=1)
    (tmp_path / "mpi.yaml").write_text(yaml.safe_dump(data))
    scenario = load_scenario(tmp_path / "mpi.yaml")
    workload = scenario.workloads[0]
    assert isinstance(workload, TrainingWorkload)
    tiny = Overrides(batch_per_gpu=4, image_size=16, model="resnet-tiny", steps=2,
                     warmup_steps=1)
    with NetnsLab(2) as net:
        net.shape_all(1000)
        launcher, nodes = netns_mpi_nodes(net, tmp_path / "work")
        notes: list[str] = []
        launch = prepare_launch(scenario, 0, workload, nodes, tmp_path / "work", tiny, notes)
        job = replace(mpi_training_job(scenario, workload, launch, True, notes),
                      launcher=launcher, rsh_agent=str(netns_rsh_agent(net, tmp_path)),
                      interface=lab_cidr(net))
        record = run_mpi_job(job, tmp_path / "out").record
    assert record["status"] == "ok", record.get("reason")
    assert (record["world_size"], record["settings"]["nodes"]) == (2, 2)
    assert {rank["node_rank"] for rank in record["ranks"]} == {0, 1}
    assert record["totals"]["params_in_sync"] is True
    assert "mpi: 1 rank(s) per node x 1 thread(s) per rank" in notes


def test_daemons_that_fail_to_start_once_are_started_again(tmp_path: Path) -> None:
    """The rsh agent fails its first call, as a node that does not answer in time: mpirun
    cannot start its daemons, vgpu starts it once more and the record says so."""
    with NetnsLab(2) as net:
        launcher, nodes = netns_mpi_nodes(net, tmp_path / "work")
        agent = netns_rsh_agent(net, tmp_path)
        flaky = tmp_path / "flaky-rsh"
        marker = tmp_path / "failed-once"
        flaky.write_text(f"#!/bin/bash\nif [ ! -e {marker} ]; then touch {marker}; exit 255; fi\n"
                         f'exec {agent} "$@"\n')
        flaky.chmod(0o755)
        settings = MpiProbeSettings(sizes_bytes=(1024,), iterations=2, large_iterations=1,
                                    launcher=launcher, rsh_agent=str(flaky),
                                    interface=lab_cidr(net))
        with ResultStore.open(tmp_path / "results.db") as store:
            run = run_mpi_probe(link_scenario(tmp_path, MBIT), nodes, tmp_path / "out",
                                store=store, target_kind="bare-metal", settings=settings)
    assert marker.exists()
    assert run.record["world_size"] == 2
    assert "mpirun exit" in run.record["relaunched_after"]


def test_daemons_that_never_start_end_in_an_error_after_three_launches(tmp_path: Path) -> None:
    """An rsh agent that always fails: vgpu launches three times, pausing between, then
    says how many launches it made and what the first one printed."""
    with NetnsLab(2) as net:
        launcher, nodes = netns_mpi_nodes(net, tmp_path / "work")
        calls = tmp_path / "calls"
        dead = tmp_path / "dead-rsh"
        dead.write_text(f"#!/bin/bash\necho call >> {calls}\nexit 255\n")
        dead.chmod(0o755)
        settings = MpiProbeSettings(sizes_bytes=(1024,), iterations=2, large_iterations=1,
                                    launcher=launcher, rsh_agent=str(dead),
                                    interface=lab_cidr(net))
        with (ResultStore.open(tmp_path / "results.db") as store,
              pytest.raises(RemoteError) as raised):
            run_mpi_probe(link_scenario(tmp_path, MBIT), nodes, tmp_path / "out",
                          store=store, target_kind="bare-metal", settings=settings)
    assert "launch 3 of 3" in str(raised.value)
    assert "started again after 2 failed launch(es), the first: mpirun exit" in \
        str(raised.value)
    assert len(calls.read_text().split()) >= 3
    assert not (tmp_path / "out" / "result.json").exists()

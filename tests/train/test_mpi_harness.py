"""The MPI runtime's harness parts that need no mpirun: OSU-style sizes, windows and
bus-bandwidth factors, the rank pair for point-to-point, the gradient buckets of the
Horovod-style trainer, and the specs' checks."""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="the train extra (torch) is not installed")

from torch import nn

from loadgen.contract import OSU_SIZES, MpiProbeRunSpec
from loadgen.errors import SpecError
from loadgen.train.mpi_probe import bus_factor, iterations_for, peer_rank, window_for
from loadgen.train.mpi_train import gradient_buckets
from loadgen.train.spec import parse_allreduce_spec, parse_mpi_probe_spec, parse_train_spec


def test_osu_sizes_run_from_one_byte_to_64_mib() -> None:
    assert OSU_SIZES[0] == 1 and OSU_SIZES[-1] == 64 << 20 and len(OSU_SIZES) == 27
    spec = MpiProbeRunSpec(iterations=100, large_iterations=10, window=64)
    assert (iterations_for(spec, 8192), iterations_for(spec, 16384)) == (100, 10)
    assert (window_for(spec, 1024), window_for(spec, 4 << 20), window_for(spec, 64 << 20)) \
        == (64, 16, 1)


def test_bus_factors_follow_nccl_tests_and_one_rank_has_none() -> None:
    assert bus_factor("allreduce", 4) == pytest.approx(1.5)
    assert bus_factor("allgather", 4) == pytest.approx(0.75)
    assert bus_factor("bcast", 4) == 1.0 and bus_factor("allreduce", 1) is None


def test_point_to_point_pairs_rank_zero_with_another_node() -> None:
    assert peer_rank([0, 0, 1, 1]) == 2  # two ranks per node: the pair crosses the link
    assert peer_rank([0, 0, 0, 0]) == 1


def test_gradient_buckets_are_capped_and_reversed() -> None:
    model = nn.Sequential(nn.Linear(256, 256), nn.Linear(256, 10))  # 257 KiB, 1 KiB, ...
    params = list(model.parameters())
    buckets = gradient_buckets(params, cap_bytes=64 * 1024)
    assert [p for bucket in buckets for p in bucket] == list(reversed(params))
    assert [len(b) for b in buckets] == [3, 1]  # the 256x256 weight is a bucket of its own


def test_mpi_needs_cpu_tensors_and_its_own_probe() -> None:
    base = {"schema_version": 1, "backend": "mpi"}
    with pytest.raises(SpecError, match=r"backend.*device is gpu.*device \"cpu\""):
        parse_train_spec({**base, "device": "gpu"}, "t.json")
    assert parse_train_spec({**base, "device": "cpu"}).backend == "mpi"
    with pytest.raises(SpecError, match="mpiprobe command"):
        parse_allreduce_spec({**base, "device": "cpu"}, "a.json")


def test_mpi_probe_spec_names_bad_sizes() -> None:
    with pytest.raises(SpecError) as caught:
        parse_mpi_probe_spec({"schema_version": 1, "sizes_bytes": [1, 0, "2"]}, "p.json")
    text = str(caught.value)
    assert "p.json" in text and "sizes_bytes[1]" in text and "sizes_bytes[2]" in text
    assert parse_mpi_probe_spec({"schema_version": 1}).sizes_bytes == OSU_SIZES


def test_daemons_keep_their_topology_out_of_a_fixed_address_hole() -> None:
    from vgpu.train.launch import TrainNode
    from vgpu.train.mpirun import MpiJob, mpirun_argv

    nodes = [TrainNode(f"n{i}", None, f"10.0.0.{i}", "/w") for i in (1, 2)]  # type: ignore[arg-type]
    for job in (MpiJob(nodes, 1, "train", {}, 1), MpiJob(nodes[:1], 2, "train", {}, 1)):
        argv = mpirun_argv(job, as_root=False)
        at = argv.index("rtc_hwloc_vmhole")
        assert argv[at - 1:at + 2] == ["--mca", "rtc_hwloc_vmhole", "none"]
    single = mpirun_argv(MpiJob(nodes[:1], 2, "train", {}, 1), as_root=False)
    assert single[single.index("--host") + 1] == "localhost:2"

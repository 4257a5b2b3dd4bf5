"""`vgpu bench --triton-url`: the workloads with backend triton use a running server (the
nvidia-pytriton wheel's, started by the test) and nothing is deployed; the server-side
split is stored with every run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from loadgen.models import build_model
from loadgen.triton_repo import write_repository
from tests.bench.conftest import RAN_AND_STORED, RunVgpu
from tests.labs.triton import TritonServer, triton_unavailable
from vgpu.results.store.result_store import ResultStore
from vgpu.results.views.server_split import SPLIT_METRICS

pytestmark = [pytest.mark.triton, pytest.mark.slow,
              pytest.mark.skipif(triton_unavailable() is not None,
                                 reason=triton_unavailable() or "")]
SCENARIO = """\
id: triton-url
name: triton-at-a-url
platform: bare-metal
gpu: A100-80GB
vms: [{name: "u-1", vgpus: [1g.10gb]}]
workloads:
  - {name: r, model: resnet50, variant: tiny, backend: triton, batch: 8}
repeats: 1
"""


@pytest.fixture
def server(harness_cache: Path, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[TritonServer]:
    repo = tmp_path_factory.mktemp("url-triton") / "repo"
    write_repository(repo, build_model("resnet50", "tiny", "fp32", harness_cache), "resnet50",
                     kind="python", max_batch_size=8, intra_op_threads=1)
    with TritonServer(repo) as running:
        yield running


def test_an_existing_server_is_used_and_nothing_is_deployed(
        run_vgpu: RunVgpu, server: TritonServer, tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(SCENARIO)
    done = run_vgpu("bench", "s.yaml", "--triton-url", server.grpc_url, "--duration", "2",
                    "--no-report", "--json", timeout=300)
    assert done.returncode in RAN_AND_STORED, done.stderr[-3000:]
    [workload] = json.loads(done.stdout)["workloads"]
    assert workload["detail"]["triton"] == {"url": server.grpc_url, "deployed": False}
    assert not (tmp_path / "vgpu-results" / "triton").exists()
    with ResultStore.open(tmp_path / "vgpu-results.db") as store:
        [run] = store.runs(status="ok")
        stored = {m.name: m.value for m in store.metrics(run.id) if m.instance == "u-1"
                  and m.name in SPLIT_METRICS.values()}
        assert set(stored) == set(SPLIT_METRICS.values())
        assert all(value > 0 for value in stored.values())

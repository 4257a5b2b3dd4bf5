"""The harness's ceiling path (benchmarks/harness_ceiling.py) keeps working: the whole
harness around the null backend completes every sample through the rows-only path, the
token SUT around an instant generator counts every token; and the SUT's array queue takes
batches in issue order across LoadGen queries. No timing is asserted: the rates are the
benchmark's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks import harness_ceiling
from loadgen.backends.null import NullBackend
from loadgen.models import builtin_model_io
from loadgen.qsl import SampleLibrary
from loadgen.sut import PendingSamples


def test_pending_samples_are_taken_in_order_across_queries() -> None:
    pending = PendingSamples()
    pending.add(np.arange(5, dtype=np.uint64), np.arange(100, 105))
    pending.add(np.arange(5, 8, dtype=np.uint64), np.arange(105, 108))
    first_ids, first_indices = pending.take(3)
    assert first_ids.tolist() == [0, 1, 2] and first_indices.tolist() == [100, 101, 102]
    assert first_ids.base is not None  # a view of the query's array, not a copy
    ids, indices = pending.take(4)  # spans both queries
    assert ids.tolist() == [3, 4, 5, 6] and indices.tolist() == [103, 104, 105, 106]
    assert pending.count == 1
    ids, _ = pending.take(10)
    assert ids.tolist() == [7] and pending.count == 0
    assert len(pending.take(4)[0]) == 0


def test_preloaded_rows_are_the_indices_themselves() -> None:
    io = builtin_model_io("bert", "tiny", "fp32")
    library = SampleLibrary(io, seed=1, performance_count=16)
    library.preload()
    library.load(list(range(16)))
    indices = np.array([5, 2, 9])
    assert library.rows(indices) is indices
    batch = library.batch(indices)
    assert batch[io.inputs[0].name].shape[0] == 3
    np.testing.assert_array_equal(batch[io.inputs[0].name][1],
                                  library.preloaded[io.inputs[0].name][2])


def test_null_backend_hands_back_outputs_only_when_wanted() -> None:
    io = builtin_model_io("resnet50", "tiny", "fp32")
    backend = NullBackend(list(io.outputs))
    got: list[object] = []
    try:
        backend.submit_rows(np.arange(4), lambda outputs, error: got.append(outputs))
        backend.want_outputs(False)
        backend.submit_rows(np.arange(2), lambda outputs, error: got.append(outputs))
    finally:
        backend.close()
    assert [o.shape[0] for o in got[0]] == [4] * len(io.outputs)
    assert got[1] == []
    assert backend.rows_seen == 6


@pytest.mark.parametrize("host_gather", [False, True])
def test_the_ceiling_path_completes_every_sample(tmp_path: Path, host_gather: bool) -> None:
    spec = harness_ceiling.sample_spec("bert", 8, 0.2, 20_000.0, tmp_path)
    record = harness_ceiling.run_null(spec, tmp_path, host_gather=host_gather)
    sut = record["sut"]
    assert record["backend"]["name"] == "null"
    assert record["backend"]["samples_on_device"] is (not host_gather)
    assert sut["failed_samples"] == 0
    assert sut["completed_samples"] == record["sample_count"] > 0
    assert sut["batches"] == -(-sut["completed_samples"] // 8)


@pytest.mark.slow  # about 5 s or more: the whole suite runs it, the quick tier not
def test_the_benchmark_writes_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "ceiling.json"
    status = harness_ceiling.main(["--workload", "llm", "--seconds", "0.3", "--cores", "0",
                                   "--json", str(out)])
    figures = json.loads(out.read_text())
    clients = [figures["llm"], figures["llm_http"]]
    assert [c["client"] for c in clients] == ["in-process", "http-sse"]
    assert status == (0 if all(c["status"] == "met" for c in clients) else 1)
    for llm in clients:
        assert llm["output_tokens"] > 0
        assert llm["output_tokens"] % llm["tokens_per_answer"] == 0  # every token counted
        assert llm["ratio"] == pytest.approx(llm["tokens_per_second"] / llm[
            "reference_tokens_per_second"])
        assert llm["client_cpu_us_per_token"] > 0

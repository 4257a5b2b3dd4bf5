"""One harness run: the spec's model decides which run it is, a sample model's
(``loadgen.sample_run``) or the LLM token workload's (``loadgen.llm.run``, or with
``llm.capacity`` in Server/Interactive the capacity search of
``loadgen.llm.capacity_run``); each writes result.json whatever happens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loadgen.contract import LLM_MODEL, TOKEN_SCENARIOS
from loadgen.spec import Spec
from loadgen.sync import StdinSync


def run(spec: Spec, out_dir: str | Path, sync: StdinSync | None = None) -> dict[str, Any]:
    """Run the spec and write ``out_dir/result.json``; returns the record (status ok or
    failed). Only a broken record (a bug) raises."""
    if spec.model.name == LLM_MODEL and spec.llm is not None and \
            spec.llm.capacity is not None and spec.loadgen.scenario in TOKEN_SCENARIOS:
        from loadgen.llm.capacity_run import run_capacity

        return run_capacity(spec, out_dir, sync)
    if spec.model.name == LLM_MODEL:
        from loadgen.llm.run import run_llm

        return run_llm(spec, out_dir, sync)
    from loadgen.sample_run import run_sample_model

    return run_sample_model(spec, out_dir, sync)

"""``vgpu compare-capacity``: the LLM serving verdict from capacity searches at the latency
SLO (``python -m loadgen.llm.capacity`` on bare metal and on the VM, and the VM's runs at
bare metal's capacity)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from vgpu.cli import common
from vgpu.cli.options import JsonOpt
from vgpu.cli.root import app
from vgpu.errors import InputError, VerdictFailed


@app.command("compare-capacity")
def compare_capacity(
    bare: Annotated[Path, typer.Argument(help="bare metal's capacity search (JSON)")],
    vm: Annotated[Path, typer.Argument(help="the VM's capacity search (JSON)")],
    vm_matched: Annotated[Path, typer.Argument(
        help="the VM's runs at bare metal's capacity (--matched-to BARE)")],
    capacity_pct: Annotated[float, typer.Option(
        help="allowed capacity loss, % of bare metal's")] = 3.0,
    itl_pct: Annotated[float, typer.Option(
        help="allowed rise of inter-token latency p99 at the matched load, %")] = 5.0,
    tpot_pct: Annotated[float, typer.Option(
        help="allowed rise of mean time per output token at the matched load, %")] = 5.0,
    as_json: JsonOpt = False,
) -> None:
    """Judge a VM's LLM serving against bare metal: capacity at the SLO (ratio with a CI
    over paired repeats), VALID at bare metal's capacity, ITL p99 and mean TPOT there."""
    from vgpu.results.verdict.capacity import CapacityFileError, judge_capacity, load_capacity_file

    try:
        verdict = judge_capacity(load_capacity_file(bare, matched=False),
                                 load_capacity_file(vm, matched=False),
                                 load_capacity_file(vm_matched, matched=True),
                                 capacity_pct=capacity_pct, itl_pct=itl_pct,
                                 tpot_pct=tpot_pct)
    except CapacityFileError as exc:
        raise InputError.single(str(exc.path), exc.field, exc.message, fix=exc.fix) from exc
    except ValueError as exc:
        raise InputError.single(f"{bare}, {vm}, {vm_matched}", "repeats", str(exc),
                                fix="run every search with the same --seed, --repeats, "
                                "--ttft-ms, --tpot-ms and --output-tokens") from exc
    if as_json:
        typer.echo(json.dumps({"passed": verdict.passed, "verdict": verdict.verdict,
                               "capacity": asdict(verdict.capacity),
                               "checks": [asdict(c) for c in verdict.checks]}, indent=2))
    else:
        for line in verdict.lines():
            common.console.print(line, markup=False)
        common.console.print(f"LLM verdict: {verdict.verdict}")
    if verdict.verdict == "FAIL":
        raise VerdictFailed("LLM capacity verdict: FAIL")

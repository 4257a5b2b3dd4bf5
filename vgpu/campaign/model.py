"""The campaign file: which hosts, in what order, which scenarios judge them, how each is
upgraded, and what a host may take. Every problem names the file, the field and the fix."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from vgpu.defaults import DEFAULT_BASELINE
from vgpu.errors import InputError, Problem
from vgpu.model.base import FileModel, StrictModel, validate_doc
from vgpu.model.yamlsource import load_yaml

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
HOST_PLACEHOLDER = "{host}"


class SimFaults(StrictModel):
    """What the simulator lab's upgrade of one host breaks (a SIMULATED fault)."""

    slowdown_pct: float = Field(0.0, ge=0.0, le=80.0, description="share of the host's "
                                "guests' work the upgrade takes away, in percent")
    drop_vib: bool = Field(False, description="the new image has no NVIDIA component")
    unload_module: bool = Field(False, description="the VIB stays, its vGPU manager does "
                                "not load")


class Upgrade(StrictModel):
    """How each host is upgraded once it is drained."""

    method: Literal["manual", "command", "sim"] = Field(
        description="manual: the campaign stops and says `upgrade H now, then vgpu "
        "campaign continue`; command: the lab's own script, given the host name ({host}), "
        "exit 0 = upgraded; sim: the simulator lab's upgrade (vgpu sim upgrade --host)")
    command: str | None = Field(None, description="with method command: the command line, "
                                "{host} replaced by the host's name, e.g. "
                                "`./upgrade-esxi.sh {host}`")
    timeout_s: float = Field(7200.0, gt=0, description="how long the command may take")
    esxi_build: str | None = Field(None, description="with method sim: the build installed")
    vib_version: str | None = Field(None, description="with method sim: the NVIDIA VIB "
                                    "version installed")
    faults: dict[str, SimFaults] = Field(default_factory=dict, description="with method "
                                         "sim: host name -> what its upgrade breaks")

    @model_validator(mode="after")
    def _method_fields(self) -> Upgrade:
        if self.method == "command" and not self.command:
            raise ValueError("method command needs 'command': the lab's upgrade script, "
                             "e.g. `./upgrade-esxi.sh {host}`")
        if self.method != "command" and self.command:
            raise ValueError(f"'command' is for method command, not {self.method}")
        if self.method != "sim" and (self.faults or self.esxi_build or self.vib_version):
            raise ValueError("faults, esxi_build and vib_version are for method sim")
        return self


class Campaign(FileModel):
    """One cluster's rolling upgrade."""

    name: str = Field(description="the campaign's id: its state file, its lease and its "
                      "marks in vCenter carry it (letters, digits, . _ -)")
    inventory: str | None = Field(None, description="the lab's inventory file (relative to "
                                  "this file); unset: found as for every command")
    hosts: list[str] = Field(min_length=1, description="the ESXi hosts, in upgrade order")
    scenarios: list[str] = Field(min_length=1, description="the scenario ids that judge "
                                 "each host (each runs pinned to the host)")
    workloads: list[str] = Field(default_factory=list, description="only these workloads "
                                 "of each scenario (default: all)")
    runs: int | None = Field(None, ge=1, description="bench runs per series (default: the "
                             "scenario's sequential design)")
    duration_s: float | None = Field(None, gt=0, description="LoadGen min duration per run")
    baseline: str = Field(DEFAULT_BASELINE, description="the named baseline each host is "
                          "judged against (its own: <baseline>@<host>)")
    baseline_series: int = Field(3, ge=1, description="series of a baseline captured for a "
                                 "host that has none (their spread judges later series)")
    tolerance_pct: float | None = Field(
        None, gt=0, le=50, description="the throughput loss a host may show against its "
        "own baseline and still pass, in percent (default: each scenario's "
        "tolerances.throughput_pct); a lab whose runs vary more than that needs a wider "
        "one to ever pass, and says so here")
    gate_on_bare_metal: bool = Field(
        False, description="the gate also needs the VMs' comparison with bare metal to "
        "PASS (default: the host is gated on its own pre-upgrade baseline and the accuracy "
        "check; bare metal is shown)")
    budget_per_host_s: float = Field(7200.0, gt=0, description="time one host may take from "
                                     "its drain to its verdict; past it the campaign stops")
    upgrade: Upgrade

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not NAME.match(value):
            raise ValueError(f"'{value}' is not a campaign name: letters, digits, '.', '_' "
                             "and '-', at most 64")
        return value

    @field_validator("hosts")
    @classmethod
    def _distinct(cls, hosts: list[str]) -> list[str]:
        twice = sorted({h for h in hosts if hosts.count(h) > 1})
        if twice:
            raise ValueError(f"host(s) {', '.join(twice)} listed twice: each host is "
                             "upgraded once")
        return hosts

    @model_validator(mode="after")
    def _faults_on_hosts(self) -> Campaign:
        stray = sorted(set(self.upgrade.faults) - set(self.hosts))
        if stray:
            raise ValueError(f"upgrade.faults names host(s) {', '.join(stray)} not in hosts")
        return self

    def inventory_path(self) -> Path | None:
        if self.inventory is None:
            return None
        path = Path(self.inventory)
        return path if path.is_absolute() or self.source is None \
            else Path(self.source).parent / path


def load_campaign(path: Path) -> Campaign:
    """The campaign in ``path``, or InputError (exit 2) naming file, field and fix."""
    if not path.is_file():
        raise InputError([Problem(str(path), "(file)", "no such campaign file",
                                  fix="pass the path of a campaign YAML (docs/campaign.md)")])
    campaign = validate_doc(Campaign, load_yaml(path))
    campaign.source = str(path)
    return campaign

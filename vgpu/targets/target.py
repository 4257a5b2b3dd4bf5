"""Where harness instances run. A Target is one harness instance on one host, reached
through a Transport (LocalTransport for this machine, SSHTransport for a VM or a
bare-metal host): the same fan-out code drives both."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vgpu.remote.transport import Transport
from vgpu.results.store.records import Platform, TargetKind
from vgpu.targets.clock import ClockOffset
from vgpu.targets.containers import ContainerLaunch


@dataclass
class Target:
    instance: str
    transport: Transport
    harness: str  # command that starts the harness CLI, e.g. "/usr/bin/python3 -m loadgen"
    work_root: str  # folder on the target for specs and outputs (per run below it)
    device: dict[str, Any]  # the harness spec's device section
    device_label: str  # what the record says was used ("CPU, no MIG slice", "MIG 2g.20gb")
    target_kind: TargetKind
    threads: int | None = None
    planned_slice: str | None = None  # the scenario's vGPU/MIG profile for this instance
    platform: Platform | None = None
    local_root: Path | None = None  # set when work_root is this machine's folder
    env: dict[str, str] = field(default_factory=dict)
    container: ContainerLaunch | None = None  # set: every round runs in its own container
    clock: ClockOffset | None = None  # its host's clock against this machine's (remote)

    @property
    def is_local(self) -> bool:
        return self.local_root is not None

    def cleanup_command(self, out_dir: str, tag: str) -> str | None:
        """Removes what a killed round may leave running (its container), if anything."""
        if self.container is None:
            return None
        return self.container.remove_command(self.instance, out_dir, tag)

    def work_dir(self, tag: str) -> str:
        return f"{self.work_root.rstrip('/')}/{tag}/{self.instance}"

    @property
    def runtime(self) -> str:
        return "container" if self.container else "host"

    def command(self, spec_path: str, out_dir: str, tag: str = "adhoc") -> str:
        """Starts one round of this instance: ``spec_path`` lies in ``out_dir``."""
        if self.container is not None:
            return self.container.run_command(self.instance, out_dir, tag, self.env)
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        run = (f"{self.harness} run {shlex.quote(spec_path)} --out {shlex.quote(out_dir)} "
               "--sync stdin")
        return f"env {env} {run}" if env else run

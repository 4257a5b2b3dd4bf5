"""`python -m vgpu.nvml COMMAND`: the MIG layer as a small JSON program, for a bare-metal host
reached over SSH (and scripts). Needs only the standard library, vgpu.mig and pynvml.

    status                      GPUs, MIG mode, instances, MIG devices
    mig-devices                 the MIG devices a benchmark runs on (uuid, profile, start)
    apply --layout FILE|-       create a layout ({gpu, model, slices: [{profile, start,
                                owner}]}) [--enable-mig] [--replace-existing] [--dry-run]
    destroy [--gpu N] [--restore]
    verify-catalogue [--gpu N]  exit 1 on any difference

Every command prints one JSON object. Errors print {"error", "kind", "exit_code"} and exit
with vgpu's exit code (2: bad input, nothing changed; 1: the GPU refused or needs action).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from vgpu.errors import ParameterError, VgpuError
from vgpu.nvml.backend import GpuBackend
from vgpu.nvml.catalogue_check import check_catalogue
from vgpu.nvml.errors import GPU_INDEX, MIG_DISABLED, MIG_SWITCH
from vgpu.nvml.layout import apply_layout
from vgpu.nvml.local_devices import mig_devices_for_bench
from vgpu.nvml.select import backend_for_this_machine
from vgpu.nvml.spec import LayoutSpec
from vgpu.nvml.state import StateStore
from vgpu.nvml.status import snapshots
from vgpu.nvml.teardown import destroy_layout

# This program's flags for the MIG operations' parameters, and the fixes worded with them.
FLAGS = {GPU_INDEX: "--gpu", MIG_SWITCH: "--enable-mig"}
FIXES = {MIG_DISABLED: "rerun with --enable-mig when the GPU is free (or enable it yourself: "
                       "`sudo nvidia-smi -i {gpu} -mig 1`)"}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m vgpu.nvml",
                                     description="MIG layouts through NVML, as JSON")
    parser.add_argument("--simulator", help="simulated GPU model when NVML finds no GPU")
    parser.add_argument("--state-file", type=Path, help="layout state file")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("status")
    sub.add_parser("mig-devices")
    apply = sub.add_parser("apply")
    apply.add_argument("--layout", required=True, help="layout JSON file, or - for stdin")
    apply.add_argument("--enable-mig", action="store_true")
    apply.add_argument("--replace-existing", action="store_true")
    apply.add_argument("--dry-run", action="store_true")
    destroy = sub.add_parser("destroy")
    destroy.add_argument("--gpu", type=int, default=0)
    destroy.add_argument("--restore", action="store_true")
    verify = sub.add_parser("verify-catalogue")
    verify.add_argument("--gpu", type=int, default=0)
    return parser


def _read_layout(source: str) -> LayoutSpec:
    text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    return LayoutSpec.from_json(json.loads(text))


def run(args: argparse.Namespace, backend: GpuBackend, log: list[str]) -> dict[str, Any]:
    store = StateStore(path=args.state_file) if args.state_file else StateStore()
    out: dict[str, Any] = {"backend": backend.description, "simulated": backend.simulated}
    if args.command == "status":
        out["gpus"] = [s.to_json() for s in snapshots(backend)]
    elif args.command == "mig-devices":
        out["mig_devices"] = [asdict(d) for d in mig_devices_for_bench(backend, store=store)]
    elif args.command == "apply":
        spec = _read_layout(args.layout)
        result = apply_layout(backend, spec, store, enable_mig=args.enable_mig,
                              replace_existing=args.replace_existing, dry_run=args.dry_run,
                              source=f"layout {args.layout}", log=log.append)
        out.update(gpu=result.gpu, actions=result.actions, dry_run=result.dry_run,
                   already_applied=result.already_applied,
                   created=[asdict(c) for c in result.created])
    elif args.command == "destroy":
        result_d = destroy_layout(backend, args.gpu, store, restore=args.restore,
                                  log=log.append)
        out.update(gpu=args.gpu, actions=result_d.actions)
    elif args.command == "verify-catalogue":
        report = check_catalogue(backend, args.gpu)
        out.update(gpu=args.gpu, model=report.model.key, notes=report.notes,
                   differences=[asdict(d) for d in report.differences])
    return out


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    log: list[str] = []
    try:
        backend = backend_for_this_machine(args.simulator)
        try:
            out = run(args, backend, log)
        finally:
            backend.close()
    except ValueError as exc:  # an unreadable layout
        out, code = {"error": str(exc), "kind": "InputError", "exit_code": 2}, 2
    except VgpuError as exc:
        if isinstance(exc, ParameterError):  # bad input, told with this program's flags
            out = {"error": str(exc.named(FLAGS, FIXES)), "kind": "InputError"}
        else:
            out = {"error": str(exc), "kind": type(exc).__name__}
        out["exit_code"] = exc.exit_code
        code = exc.exit_code
    else:
        code = 1 if out.get("differences") else 0
    out["log"] = log
    print(json.dumps(out, indent=2))
    return code


if __name__ == "__main__":
    sys.exit(main())

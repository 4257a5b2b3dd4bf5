"""Command-line entries: ``run``, ``model`` and ``triton-repo``. Each takes its argv and
returns the exit code: 0 ok, 2 bad input (nothing was run), 1 the run failed."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from loadgen.errors import SpecError

SYNC_MODES = ("stdin",)


def _eprint(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="vgpu-harness run",
        description="Run one MLPerf LoadGen test from a JSON spec and write DIR/result.json.")
    parser.add_argument("spec", type=Path, help="run spec (JSON, schema_version 1)")
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--sync", choices=SYNC_MODES,
                        help="print 'VGPU-HARNESS READY', wait for 'GO <unix time>' on stdin")
    args = parser.parse_args(argv)
    from loadgen.spec import load_spec

    try:
        spec = load_spec(args.spec)
    except SpecError as exc:
        _eprint(f"error: invalid run spec\n{exc}")
        return exc.exit_code
    from loadgen.runner import run
    from loadgen.sync import StdinSync

    record = run(spec, args.out, StdinSync() if args.sync == "stdin" else None)
    if record["status"] != "ok":
        _eprint(f"run failed: {record['reason']} (logs and result.json in {args.out})")
        return 1
    rate = (record.get("throughput") or {}).get("samples_per_second")
    validity = (record.get("validity") or {}).get("result")
    _eprint(f"{record['scenario']} {record['mode']}: {rate} samples/s, {validity}; "
            f"result in {args.out / 'result.json'}")
    return 0


def model_main(argv: Sequence[str] | None = None) -> int:
    from loadgen.models import DEFAULT_VARIANT, PRECISIONS, VARIANTS, build_model

    parser = argparse.ArgumentParser(
        prog="vgpu-harness model", description="Build (or find in the cache) a built-in "
        "model and print the path of its ONNX file.")
    parser.add_argument("--name", required=True, choices=sorted(VARIANTS))
    parser.add_argument("--variant", help="resnet50: full|tiny; bert: large|base|tiny")
    parser.add_argument("--precision", default="fp32", choices=sorted(PRECISIONS))
    parser.add_argument("--cache-dir", type=Path)
    args = parser.parse_args(argv)
    variant = args.variant or DEFAULT_VARIANT[args.name]
    if variant not in VARIANTS[args.name]:
        _eprint(f"error: --variant {variant!r} is not one of {', '.join(VARIANTS[args.name])}")
        return 2
    print(build_model(args.name, variant, args.precision, args.cache_dir))
    return 0


def triton_repo_main(argv: Sequence[str] | None = None) -> int:
    from loadgen.models import DEFAULT_VARIANT, PRECISIONS, VARIANTS, build_model
    from loadgen.triton_repo import DEVICES, KINDS, RepositoryError, write_repository

    parser = argparse.ArgumentParser(
        prog="vgpu-harness triton-repo",
        description="Write a Triton model repository for a built-in model or an ONNX file.")
    parser.add_argument("--model", required=True, help="resnet50, bert or a path to .onnx")
    parser.add_argument("--variant")
    parser.add_argument("--precision", default="fp32", choices=sorted(PRECISIONS))
    parser.add_argument("--out", type=Path, required=True, help="repository folder")
    parser.add_argument("--kind", choices=KINDS, default="python",
                        help="python: onnxruntime inside Triton's python backend (KIND_CPU); "
                        "onnxruntime: Triton's onnxruntime backend (KIND_GPU)")
    parser.add_argument("--device", choices=DEVICES,
                        help="instance group KIND_GPU or KIND_CPU (default: cpu for python, "
                        "gpu for onnxruntime)")
    parser.add_argument("--model-name", help="name in the repository (default: the model's)")
    parser.add_argument("--max-batch-size", type=int, default=64)
    parser.add_argument("--instances", type=int, default=1)
    parser.add_argument("--threads", type=int, help="onnxruntime intra-op threads (python)")
    parser.add_argument("--cache-dir", type=Path)
    args = parser.parse_args(argv)
    if args.model in VARIANTS:
        variant = args.variant or DEFAULT_VARIANT[args.model]
        if variant not in VARIANTS[args.model]:
            _eprint(f"error: --variant {variant!r} is not one of "
                    f"{', '.join(VARIANTS[args.model])}")
            return 2
        model_path = build_model(args.model, variant, args.precision, args.cache_dir)
        name = args.model_name or args.model
    else:
        model_path = Path(args.model)
        if model_path.suffix != ".onnx" or not model_path.is_file():
            _eprint(f"error: --model {args.model!r} is neither resnet50, bert nor an existing "
                    f".onnx file")
            return 2
        name = args.model_name or model_path.stem
    try:
        model_dir = write_repository(args.out, model_path, name, kind=args.kind,
                                     max_batch_size=args.max_batch_size,
                                     instances=args.instances, intra_op_threads=args.threads,
                                     device=args.device)
    except RepositoryError as exc:
        _eprint(f"error: {exc}")
        return 2
    print(model_dir)
    return 0

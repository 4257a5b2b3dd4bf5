"""Overhead of the training harness: our training step (the model as train_rank trains it:
DDP when there are peers, the bare model in a world of one; autocast/GradScaler plumbing;
per-step synchronise and timer, as loadgen.train.loop runs it) against a plain PyTorch loop
on the same model, batch and threads. The two alternate step by step in one process, and
which goes first alternates too, so other load on the machine hits both alike; throughput
is batch / median step time. The CPU time the process spent per step (all its threads) is
printed too: on a machine shared with other work it is the steadier measure.

    .venv/bin/python benchmarks/train_overhead.py [--model resnet50] [--image-size 224]
        [--batch 8] [--steps 20] [--warmup 3] [--threads N]

Prints images/s of each and the ratio ours / plain (goal >= 0.97)."""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from torch import nn

from loadgen.train.distributed import init_rank, shutdown
from loadgen.train.loop import build_trainer, timed
from loadgen.train.models import build_model, num_classes
from loadgen.train.spec import TrainSpec

GOAL = 0.97


def plain_step(spec: TrainSpec) -> Callable[[], None]:
    """One step of a textbook loop: no DDP, no process group, no timing plumbing."""
    torch.manual_seed(spec.seed)
    model = build_model(spec.model)
    optimizer = torch.optim.SGD(model.parameters(), lr=spec.learning_rate, momentum=0.9)
    images = torch.randn(spec.batch_size, 3, spec.image_size, spec.image_size)
    labels = torch.randint(num_classes(spec.model), (spec.batch_size,))
    loss_fn = nn.CrossEntropyLoss()

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(images), labels).backward()
        optimizer.step()

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    spec = TrainSpec(
        model=args.model, image_size=args.image_size, batch_size=args.batch,
        warmup_steps=args.warmup, measured_steps=args.steps, comm_probe_steps=0,
        threads=args.threads, device="cpu", backend="gloo",
    )
    print(f"model {args.model} {args.image_size}px, batch {args.batch}, {args.steps} steps "
          f"each after {args.warmup} warm-up, {args.threads} threads, torch {torch.__version__}")
    ctx = init_rank(spec.device, spec.backend, spec.collective_timeout_s)
    try:
        ours = build_trainer(spec, ctx)
        plain = plain_step(spec)
        for _ in range(args.warmup):
            plain()
            ours.step()
        plain_wall: list[float] = []
        plain_cpu: list[float] = []
        our_wall: list[float] = []
        our_cpu: list[float] = []

        def run_plain() -> None:
            cpu = time.process_time()
            start = time.perf_counter()
            plain()
            plain_wall.append(time.perf_counter() - start)
            plain_cpu.append(time.process_time() - cpu)

        def run_ours() -> None:
            cpu = time.process_time()
            our_wall.append(timed(ctx.device, ours.step))
            our_cpu.append(time.process_time() - cpu)

        # The first step of a pair runs measurably slower than the second (two identical
        # plain loops differ by tens of percent), so the order alternates.
        for index in range(args.steps):
            for run in (run_plain, run_ours) if index % 2 == 0 else (run_ours, run_plain):
                run()
    finally:
        shutdown()
    for label, wall, cpu_times in (("plain PyTorch loop", plain_wall, plain_cpu),
                                   ("our training loop ", our_wall, our_cpu)):
        print(f"{label}: {args.batch / statistics.median(wall):8.3f} images/s "
              f"(median step {statistics.median(wall) * 1e3:.1f} ms wall, "
              f"{statistics.median(cpu_times) * 1e3:.1f} ms CPU)")
    ratio = statistics.median(plain_wall) / statistics.median(our_wall)
    cpu_ratio = statistics.median(plain_cpu) / statistics.median(our_cpu)
    verdict = "met" if ratio >= GOAL else "NOT met"
    print(f"ratio ours/plain = {ratio:.3f} images/s (goal >= {GOAL}: {verdict}); "
          f"by CPU time per step {cpu_ratio:.3f}")


if __name__ == "__main__":
    main()

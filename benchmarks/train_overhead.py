"""Overhead of the training harness: our loop (DDP at world size 1, per-step timing,
Gloo) against a plain PyTorch loop on the same model, batch and threads, measured side by
side in one run with the two alternating so drift hits both alike.

    .venv/bin/python benchmarks/train_overhead.py [--model resnet50] [--image-size 224]
        [--batch 8] [--steps 5] [--warmup 2] [--rounds 3] [--threads N]

Prints images/s of each (batch / median step time, robust to other load on the machine)
and the ratio ours / plain (goal >= 0.97)."""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

from loadgen.train.distributed import init_rank, shutdown
from loadgen.train.loop import train_rank
from loadgen.train.models import build_model, num_classes
from loadgen.train.spec import TrainSpec

GOAL = 0.97


def plain_loop(spec: TrainSpec) -> float:
    """images/s of a textbook loop: no DDP, no process group."""
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

    for _ in range(spec.warmup_steps):
        step()
    times = []
    for _ in range(spec.measured_steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return spec.batch_size / statistics.median(times)


def our_loop(spec: TrainSpec) -> float:
    ctx = init_rank(spec.device, spec.backend, spec.collective_timeout_s)
    timings = train_rank(spec, ctx)
    return spec.batch_size / statistics.median(timings.step_times_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    spec = TrainSpec(
        model=args.model, image_size=args.image_size, batch_size=args.batch,
        warmup_steps=args.warmup, measured_steps=args.steps, comm_probe_steps=0,
        threads=args.threads, device="cpu", backend="gloo",
    )
    print(f"model {args.model} {args.image_size}px, batch {args.batch}, {args.steps} steps "
          f"after {args.warmup} warm-up, {args.threads} threads, {args.rounds} rounds, "
          f"torch {torch.__version__}")
    plain, ours = [], []
    try:
        for round_index in range(args.rounds):
            plain.append(plain_loop(spec))
            ours.append(our_loop(spec))
            print(f"round {round_index + 1}: plain {plain[-1]:8.2f} images/s   "
                  f"ours {ours[-1]:8.2f} images/s   ratio {ours[-1] / plain[-1]:.3f}")
    finally:
        shutdown()
    ratio = statistics.median(ours) / statistics.median(plain)
    print(f"median: plain {statistics.median(plain):.2f} images/s, "
          f"ours {statistics.median(ours):.2f} images/s")
    verdict = "met" if ratio >= GOAL else "NOT met"
    print(f"ratio ours/plain = {ratio:.3f} (goal >= {GOAL}: {verdict})")


if __name__ == "__main__":
    main()

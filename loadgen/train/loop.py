"""One rank's DDP training run on synthetic data or on batches read from files: warm-up
steps, measured steps, an optional no_sync probe of communication cost, and a digest of
the trained parameters."""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from loadgen.train.distributed import RankContext, synchronize
from loadgen.train.feed import FileFeed
from loadgen.train.models import build_model, num_classes
from loadgen.train.spec import TrainSpec

AUTOCAST_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


@dataclass
class RankTimings:
    """What one rank measured; gathered to rank 0 as a plain dict."""

    rank: int
    local_rank: int
    node_rank: int
    host: str
    device: str
    batch_size: int
    step_times_s: list[float]
    timed_start_unix: float
    timed_end_unix: float
    synced_fb_s: list[float]
    unsynced_fb_s: list[float]
    param_digest: str
    input: dict[str, object] | None = None  # file-fed runs: what fed the measured window

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def parameter_digest(model: nn.Module) -> str:
    digest = hashlib.sha256()
    for parameter in model.parameters():
        digest.update(parameter.detach().float().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


@dataclass
class Trainer:
    model: nn.Module  # DistributedDataParallel when there are peers, else the bare model
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    images: torch.Tensor
    labels: torch.Tensor
    autocast: Callable[[], contextlib.AbstractContextManager[object]]
    loss_fn: nn.Module

    def forward_backward(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        with self.autocast():
            loss = self.loss_fn(self.model(self.images), self.labels)
        self.scaler.scale(loss).backward()

    def step(self) -> None:
        self.forward_backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()


def build_trainer(spec: TrainSpec, ctx: RankContext) -> Trainer:
    torch.manual_seed(spec.seed)  # identical initial weights on every rank
    model: nn.Module = build_model(spec.model).to(ctx.device)
    if ctx.world_size > 1:
        # Alone there is nothing to reduce: like Accelerate, a world of one trains the bare
        # model, so a one-rank baseline carries no DDP bucket copies.
        device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
        model = DistributedDataParallel(model, device_ids=device_ids)
    optimizer = torch.optim.SGD(model.parameters(), lr=spec.learning_rate, momentum=0.9)
    # Each rank trains on its own synthetic batch, as real data-parallel ranks would.
    generator = torch.Generator(device=ctx.device).manual_seed(spec.seed * 7919 + ctx.rank + 1)
    shape = (spec.batch_size, 3, spec.image_size, spec.image_size)
    images = torch.randn(shape, generator=generator, device=ctx.device)
    labels = torch.randint(
        num_classes(spec.model), (spec.batch_size,), generator=generator, device=ctx.device
    )
    dtype = AUTOCAST_DTYPES.get(spec.precision)

    def autocast() -> contextlib.AbstractContextManager[object]:
        if dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=ctx.device.type, dtype=dtype)

    scaler = torch.amp.GradScaler(ctx.device.type, enabled=spec.precision == "fp16")
    return Trainer(model, optimizer, scaler, images, labels, autocast, nn.CrossEntropyLoss())


def timed(device: torch.device, action: Callable[[], None]) -> float:
    start = time.perf_counter()
    action()
    synchronize(device)
    return time.perf_counter() - start


def _comm_probe(trainer: Trainer, ctx: RankContext, steps: int) -> tuple[list[float], list[float]]:
    """Forward+backward with and without DDP's gradient allreduce, interleaved so drift
    hits both alike. No optimizer step: the trained parameters stay as they are."""
    synced: list[float] = []
    unsynced: list[float] = []
    if not isinstance(trainer.model, DistributedDataParallel):
        return synced, unsynced  # a world of one has no communication to measure
    for _ in range(steps):
        synced.append(timed(ctx.device, trainer.forward_backward))
        with trainer.model.no_sync():
            unsynced.append(timed(ctx.device, trainer.forward_backward))
    trainer.optimizer.zero_grad(set_to_none=True)
    return synced, unsynced


def _barrier() -> None:
    torch.distributed.barrier()


@contextlib.contextmanager
def _threads(count: int | None) -> Iterator[None]:
    previous = torch.get_num_threads()
    if count is not None:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _file_step(trainer: Trainer, feed: FileFeed) -> Callable[[], None]:
    def step() -> None:
        feed.feed(trainer)  # the wait for the batch is part of the step, as in real training
        trainer.step()

    return step


def train_rank(spec: TrainSpec, ctx: RankContext) -> RankTimings:
    with _threads(spec.threads):
        trainer = build_trainer(spec, ctx)
        feed = FileFeed(spec, ctx) if spec.data.source == "files" else None
        step = trainer.step if feed is None else _file_step(trainer, feed)
        for _ in range(spec.warmup_steps):
            step()
        synchronize(ctx.device)
        _barrier()  # every rank starts the measured window together
        if feed is not None:
            feed.begin_window()
        timed_start = time.time()
        step_times = [timed(ctx.device, step) for _ in range(spec.measured_steps)]
        timed_end = time.time()
        fed = None if feed is None else feed.end_window(timed_end - timed_start)
        digest = parameter_digest(trainer.model)
        synced, unsynced = _comm_probe(trainer, ctx, spec.comm_probe_steps)
        if feed is not None:
            feed.close()
    return RankTimings(
        rank=ctx.rank,
        local_rank=ctx.local_rank,
        node_rank=ctx.node_rank,
        host=ctx.host,
        device=str(ctx.device),
        batch_size=spec.batch_size,
        step_times_s=step_times,
        timed_start_unix=timed_start,
        timed_end_unix=timed_end,
        synced_fb_s=synced,
        unsynced_fb_s=unsynced,
        param_digest=digest,
        input=fed,
    )

"""The query sample library: seeded synthetic inputs shaped after the model's inputs, or a
user's .npz dataset (one array per input plus labels). ``preload()`` produces every sample
before the synchronised start, so LoadGen's load callback (which runs after GO) only marks
which ones are loaded; without it the samples are produced in that callback."""

from __future__ import annotations

import time

import numpy as np

from loadgen.errors import RunFailed
from loadgen.models import ModelIO, TensorInfo

DEFAULT_VOCAB_SIZE = 1000
# Warm-up inputs come from their own random stream, apart from every sample index.
WARMUP_STREAM = 2**32 - 1
VOCAB_METADATA_KEY = "vgpu.vocab_size"


def _fixed_shape(tensor: TensorInfo) -> tuple[int, ...]:
    if any(d is None for d in tensor.sample_shape):
        raise RunFailed(
            f"model input {tensor.name!r} has a dynamic dimension besides the batch "
            f"({tensor.shape}); synthetic data needs fixed sizes: export the model with them"
        )
    return tuple(int(d) for d in tensor.sample_shape if d is not None)


def synthetic_sample(
    tensor: TensorInfo, rng: np.random.Generator, vocab_size: int
) -> np.ndarray:
    """One sample for one input. Float inputs are normalised images (mean 0, std 1); int
    inputs follow BERT's conventions, picked by name: masks, segment ids, token ids."""
    shape = _fixed_shape(tensor)
    if tensor.dtype.kind == "f":
        return rng.standard_normal(shape, dtype=np.float32).astype(tensor.dtype)
    name = tensor.name.lower()
    length = shape[-1] if shape else 1
    valid = int(rng.integers(max(1, length // 2), length + 1))
    positions = np.broadcast_to(np.arange(length), shape)
    if "mask" in name:
        return (positions < valid).astype(tensor.dtype)
    if "segment" in name or "token_type" in name:
        return ((positions >= valid // 2) & (positions < valid)).astype(tensor.dtype)
    return rng.integers(0, vocab_size, size=shape).astype(tensor.dtype)


class SampleLibrary:
    """Holds the loaded samples; ``batch(indices)`` gathers them into model feeds."""

    def __init__(
        self,
        model_io: ModelIO,
        seed: int,
        performance_count: int,
        dataset: dict[str, np.ndarray] | None = None,
    ) -> None:
        self.inputs = model_io.inputs
        self.seed = seed
        self.vocab_size = int(model_io.metadata.get(VOCAB_METADATA_KEY, DEFAULT_VOCAB_SIZE))
        self.dataset = dataset
        self.labels = dataset["labels"] if dataset is not None else None
        self.total_count = len(self.labels) if self.labels is not None else performance_count
        self.performance_count = min(performance_count, self.total_count)
        self._loaded: dict[str, np.ndarray] = {}
        self._preloaded: dict[str, np.ndarray] | None = None
        self._rows = np.full(self.total_count, -1, dtype=np.int64)
        self.load_seconds = 0.0
        self.first_load_end: float | None = None
        self.first_load_end_cpu: float | None = None

    def _make(self, index: int) -> dict[str, np.ndarray]:
        if self.dataset is not None:
            return {t.name: np.asarray(self.dataset[t.name][index], dtype=t.dtype)
                    for t in self.inputs}
        rng = np.random.default_rng([self.seed, index])
        return {t.name: synthetic_sample(t, rng, self.vocab_size) for t in self.inputs}

    def preload(self) -> float:
        """Every sample, made now (a dataset's arrays are used as they are); returns the
        seconds it took."""
        started = time.perf_counter()
        if self.dataset is not None:
            self._preloaded = {t.name: np.asarray(self.dataset[t.name], dtype=t.dtype)
                               for t in self.inputs}
        else:
            samples = [self._make(i) for i in range(self.total_count)]
            self._preloaded = {t.name: np.stack([s[t.name] for s in samples])
                               for t in self.inputs}
        return time.perf_counter() - started

    def load(self, indices: list[int]) -> None:
        started = time.perf_counter()
        chosen = np.asarray(indices, dtype=np.int64)
        self._rows[:] = -1
        if self._preloaded is not None:
            self._loaded = self._preloaded
            self._rows[chosen] = chosen
        else:
            samples = [self._make(i) for i in indices]
            self._loaded = {t.name: np.stack([s[t.name] for s in samples])
                            for t in self.inputs}
            self._rows[chosen] = np.arange(len(indices))
        self.load_seconds += time.perf_counter() - started
        if self.first_load_end is None:
            self.first_load_end = time.time()
            self.first_load_end_cpu = time.process_time()

    def unload(self, indices: list[int]) -> None:
        self._loaded = {}
        self._rows[np.asarray(indices, dtype=np.int64)] = -1

    @property
    def preloaded(self) -> dict[str, np.ndarray] | None:
        """Every sample, by sample index, once ``preload`` ran."""
        return self._preloaded

    def rows(self, indices: np.ndarray) -> np.ndarray:
        """Where the loaded samples ``indices`` sit in the loaded arrays: the indices
        themselves once preloaded (every sample sits at its own index), no copy."""
        if self._preloaded is not None and self._loaded is self._preloaded:
            return indices
        return self._rows[indices]

    def batch(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        """The samples ``indices`` gathered into one new array per input: the one copy a
        backend fed from host memory needs."""
        rows = self.rows(indices)
        return {name: array[rows] for name, array in self._loaded.items()}

    def warmup_feeds(self, batch_size: int) -> dict[str, np.ndarray]:
        """Feeds for warm-up queries, drawn apart from the measured samples."""
        rng = np.random.default_rng([self.seed, WARMUP_STREAM])
        return {t.name: np.stack([synthetic_sample(t, rng, self.vocab_size)
                                  for _ in range(batch_size)]) for t in self.inputs}

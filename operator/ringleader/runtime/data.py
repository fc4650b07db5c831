"""Synthetic training data with labels a model can learn, sliced per worker; used by worker.py.

Images are class prototypes plus noise: sample i is `prototype[label_i] + noise_i`, so the loss
falls as the model learns the prototypes. Token sequences follow a fixed random Markov chain
(each token has two likely successors), so next-token loss falls from ln(V) towards ln(2).
The whole dataset is the same on every rank (it is drawn from `seed`); worker w of W reads its
own contiguous slice, and batches cycle through that slice.

Memory is bounded: at most MAX_POOL_BYTES of noise images (or token sequences) are kept, and
samples beyond the pool reuse noise (labels stay per-sample), so `samples` may exceed memory.
"""

from __future__ import annotations

import torch

from ringleader.api import spec
from ringleader.runtime import models

MAX_POOL_BYTES = 256 * 1024 * 1024
NOISE_SCALE = 1.0
MARKOV_SUCCESSORS = 2


class SyntheticDataset:
    """One worker's view of the synthetic dataset: `batch(step)` returns the same batch on every run."""

    def __init__(self, data: spec.SyntheticData, input: models.InputSpec, shard: int = 0, shards: int = 1):
        if not 0 <= shard < shards:
            raise ValueError(f"shard {shard} must be in [0, {shards})")
        self.input = input
        self.samples = data.samples
        generator = torch.Generator().manual_seed(data.seed)
        if input.kind == models.IMAGE:
            sample_bytes = 4 * torch.Size(input.shape).numel()  # float32 noise image
        else:
            sample_bytes = 8 * (input.shape[0] + 1)  # int64 tokens, plus the last target
        self.pool = max(1, min(data.samples, MAX_POOL_BYTES // sample_bytes))
        if input.kind == models.IMAGE:
            self.prototypes = torch.randn((input.num_classes, *input.shape), generator=generator)  # (C, 3, H, W)
            self.labels = torch.randint(0, input.num_classes, (data.samples,), generator=generator)  # (N,)
            self.noise = NOISE_SCALE * torch.randn((self.pool, *input.shape), generator=generator)  # (P, 3, H, W)
        elif input.kind == models.TOKENS:
            vocabulary, length = input.num_classes, input.shape[0]
            successors = torch.randint(0, vocabulary, (vocabulary, MARKOV_SUCCESSORS), generator=generator)  # (V, 2)
            tokens = torch.empty((self.pool, length + 1), dtype=torch.int64)  # (P, T+1)
            tokens[:, 0] = torch.randint(0, vocabulary, (self.pool,), generator=generator)
            for t in range(length):
                choice = torch.randint(0, MARKOV_SUCCESSORS, (self.pool,), generator=generator)
                tokens[:, t + 1] = successors[tokens[:, t], choice]
            self.tokens = tokens
        else:
            raise ValueError(f"unknown input kind {input.kind!r}: expected {models.IMAGE!r} or {models.TOKENS!r}")
        # Worker `shard` owns samples [start, start + length); with fewer samples than workers, all share all.
        if data.samples >= shards:
            self.start = shard * data.samples // shards
            self.length = (shard + 1) * data.samples // shards - self.start
        else:
            self.start, self.length = 0, data.samples

    def indices(self, step: int, batch_size: int) -> torch.Tensor:
        """Sample indices of batch `step`: consecutive in the worker's slice, wrapping around it."""
        offsets = (step * batch_size + torch.arange(batch_size)) % self.length
        return self.start + offsets  # (B,)

    def batch(self, step: int, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(inputs, labels) of batch `step`, on the CPU: images (B, 3, H, W) and (B,), or tokens (B, T) and (B, T)."""
        index = self.indices(step, batch_size)
        if self.input.kind == models.IMAGE:
            labels = self.labels[index]
            return self.prototypes[labels] + self.noise[index % self.pool], labels
        sequences = self.tokens[index % self.pool]  # (B, T+1)
        return sequences[:, :-1], sequences[:, 1:]

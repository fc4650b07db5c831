"""Real data for a worker: the dataset of spec.data split into training and held-out parts, and this worker's shard.

worker.py calls `describe(...)` for the model's input shape (parameter servers too), `shard(...)` for the
batches it trains on and `held_out(...)` for what the evaluating worker measures. Every rank computes
the same split from `data.synthetic.seed`:

    order     a seeded permutation of the dataset (of the training files, where the format has a test split)
    held out  the format's test split (CIFAR), else the first heldOutPercent of the order
    shards    the rest of the order cut into one contiguous slice per worker: disjoint, together all of it
    epochs    a worker walks its slice in an order reshuffled every epoch, seeded by (seed, worker, epoch)

So a batch depends on the spec and the step only, never on timing, on every run. An ImageFolder is only
listed by every rank; a worker decodes its own slice (and the evaluating one the held-out part) and no
other image. A relative data.path is read under the data directory and may not leave it (`resolve`).
"""

from __future__ import annotations

import functools
import importlib
import math
import os
import pathlib

import torch

from ringleader.api import spec
from ringleader.runtime import datafiles, models

# Pixels in 0..255 become roughly zero-mean, unit-scale inputs, as the synthetic images are.
PIXEL_MEAN, PIXEL_SCALE = 127.5, 64.0
CIFAR_CLASSES = {spec.DataFormat.CIFAR10: 10, spec.DataFormat.CIFAR100: 100}


def resolve(data: spec.DataSpec, data_dir: str | None) -> tuple[pathlib.Path, pathlib.Path]:
    """(the dataset's directory, the root its files must stay inside), symlinks resolved.

    Relative data.path: under the data directory (the volume, or --data-dir), which is the root; refused if
    it leads out of it ("..", or a symlink). Absolute (data baked into the image): the directory is its root."""
    path = pathlib.Path(os.path.expanduser(data.path or ""))
    if path.is_absolute():
        directory = path.resolve()
        return directory, directory
    if not data_dir:
        raise datafiles.DataError(f"data.path {data.path!r} is relative but no data directory is given: set "
                                  "data.volume in a cluster, or make data.path absolute")
    root = pathlib.Path(data_dir).resolve()
    directory = (root / path).resolve()
    if not directory.is_relative_to(root):
        raise datafiles.DataError(f"data.path {data.path!r} resolves to {directory}, outside the data directory "
                                  f"{root}: a relative data.path must stay inside it (no '..' or symlink out of it)")
    return directory, root


def describe(data: spec.DataSpec, data_dir: str | None) -> models.InputSpec:
    """What one sample of the real dataset looks like, reading no more of it than needed."""
    if data.format == spec.DataFormat.DIGITS:
        side = datafiles.DIGITS_SIDE
        return models.InputSpec(models.IMAGE, (3, side, side), datafiles.DIGITS_CLASSES)
    if data.format in CIFAR_CLASSES:
        side = datafiles.CIFAR_SIDE
        return models.InputSpec(models.IMAGE, (3, side, side), CIFAR_CLASSES[data.format])
    if data.format == spec.DataFormat.IMAGE_FOLDER:
        files = _load(data, data_dir, "all")  # listed, the first image's header read: nothing decoded
        assert isinstance(files, datafiles.ImageFiles)
        return models.InputSpec(models.IMAGE, (3, files.height, files.width), len(files.classes))
    if data.format == spec.DataFormat.FACTORY:
        images = _load(data, data_dir, "train")
        assert isinstance(images, datafiles.Images)
        return models.InputSpec(models.IMAGE, tuple(images.inputs.shape[1:]), int(images.labels.max()) + 1)
    raise datafiles.DataError(f"data.format {data.format.value} is not a real dataset")


Dataset = datafiles.Images | datafiles.ImageFiles  # read whole, or (ImageFolder) listed for a part to be read


@functools.lru_cache(maxsize=4)
def _load_cached(data_json: str, data_dir: str | None, split: str) -> Dataset:
    data = spec.DataSpec.model_validate_json(data_json)
    if data.format == spec.DataFormat.DIGITS:
        return datafiles.read_digits()
    if data.format in CIFAR_CLASSES:
        directory, root = resolve(data, data_dir)
        return datafiles.read_cifar(directory, CIFAR_CLASSES[data.format], split, root)
    if data.format == spec.DataFormat.IMAGE_FOLDER:
        return datafiles.list_image_folder(*resolve(data, data_dir))
    if data.factory is not None:  # set exactly when the format is Factory (DataSpec's rule)
        return _from_factory(data.factory)
    raise datafiles.DataError(f"data.format {data.format.value} is not a real dataset")


def _load(data: spec.DataSpec, data_dir: str | None, split: str) -> Dataset:
    """The whole dataset (`split` "train" or "test" where the format has both), read (or listed) once per process."""
    if data.format not in CIFAR_CLASSES:
        split = "all"
    return _load_cached(data.model_dump_json(), data_dir, split)


def _from_factory(reference: str) -> datafiles.Images:
    module_name, _, name = reference.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), name)
        result = factory()
    except Exception as error:  # the user's code: its failure becomes one line naming the factory
        first = (str(error).strip().splitlines() or [""])[0]
        raise datafiles.DataError(f"data.factory {reference!r} failed: {type(error).__name__}: {first}") from error
    if not (isinstance(result, (tuple, list)) and len(result) == 2
            and all(isinstance(t, torch.Tensor) for t in result)):
        raise datafiles.DataError(f"data.factory {reference!r} must return a pair (inputs, labels) of tensors, "
                                  f"got {type(result).__name__}")
    inputs, labels = result
    if labels.dim() != 1 or inputs.shape[0] != labels.shape[0] or labels.is_floating_point():
        raise datafiles.DataError(f"data.factory {reference!r}: inputs {tuple(inputs.shape)} and labels "
                                  f"{tuple(labels.shape)} must be (N, ...) and (N,) integers")
    return datafiles.Images(inputs, labels.to(torch.int64))


def _order(count: int, seed: int) -> torch.Tensor:
    return torch.randperm(count, generator=torch.Generator().manual_seed(seed))  # (N,)


def _split(data: spec.DataSpec, data_dir: str | None) -> tuple[Dataset, torch.Tensor, torch.Tensor]:
    """(training images or their listing, indices of the training part in seeded order, of the held-out part)."""
    seed = data.synthetic.seed
    train = _load(data, data_dir, "train")
    order = _order(len(train), seed)
    if data.format in CIFAR_CLASSES:
        return train, order, _order(len(_load(data, data_dir, "test")), seed)
    held = math.ceil(len(train) * data.held_out_percent / 100)
    return train, order[held:], order[:held]


def as_inputs(pixels: torch.Tensor) -> torch.Tensor:
    """uint8 pixels to float inputs around zero; a factory's float inputs are left as they are."""
    if pixels.dtype == torch.uint8:
        return (pixels.float() - PIXEL_MEAN) / PIXEL_SCALE
    return pixels.float()


def _rows(images: Dataset, indices: torch.Tensor) -> tuple[datafiles.Images, torch.Tensor | None]:
    """(images holding `indices`, the row of each dataset index in them): read whole already (rows None), or
    a listing of which only `indices` are decoded, into rows 0..L-1."""
    if isinstance(images, datafiles.Images):
        return images, None
    rows = torch.full((len(images),), -1, dtype=torch.int64)  # (N,) -1: not this worker's
    rows[indices] = torch.arange(len(indices))
    return images.read(indices), rows


class Shard:
    """One worker's disjoint slice of the training part: `batch(step)` is the same batch on every run."""

    def __init__(self, images: Dataset, indices: torch.Tensor, seed: int, shard: int, shards: int):
        if not 0 <= shard < shards:
            raise ValueError(f"shard {shard} must be in [0, {shards})")
        if len(indices) < shards:
            raise datafiles.DataError(f"{len(indices)} training samples cannot be shared by {shards} workers: "
                                      "use fewer workers or lower data.heldOutPercent")
        start, end = shard * len(indices) // shards, (shard + 1) * len(indices) // shards
        self.indices = indices[start:end]  # (L,) this worker's samples
        self.images, self._rows = _rows(images, self.indices)
        self.seed, self.shard = seed, shard
        self._epochs: dict[int, torch.Tensor] = {}

    def __len__(self) -> int:
        return len(self.indices)

    def epoch_order(self, epoch: int) -> torch.Tensor:
        """The worker's samples in the order of `epoch` (dataset indices, (L,))."""
        if epoch not in self._epochs:
            if len(self._epochs) >= 2:  # batches span at most two epochs unless a batch exceeds the shard
                self._epochs.pop(min(self._epochs))
            seed = (self.seed * 1_000_003 + self.shard * 10_007 + epoch) % (2**63)
            self._epochs[epoch] = self.indices[_order(len(self.indices), seed)]
        return self._epochs[epoch]

    def sample_indices(self, step: int, batch_size: int) -> torch.Tensor:
        """Dataset indices of batch `step`: positions step*B .. step*B+B-1 of the epochs' orders."""
        positions = step * batch_size + torch.arange(batch_size)  # (B,)
        epochs, offsets = positions // len(self), positions % len(self)
        return torch.cat([self.epoch_order(int(e))[offsets[epochs == e]] for e in torch.unique(epochs)])

    def batch(self, step: int, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(inputs (B, C, H, W) float, labels (B,)) of batch `step`, on the CPU."""
        index = self.sample_indices(step, batch_size)
        rows = index if self._rows is None else self._rows[index]
        return as_inputs(self.images.inputs[rows]), self.images.labels[rows]


def shard(data: spec.DataSpec, data_dir: str | None, shard_index: int, shards: int) -> Shard:
    """Worker `shard_index` of `shards`'s part of the training data."""
    images, train, _ = _split(data, data_dir)
    return Shard(images, train, data.synthetic.seed, shard_index, shards)


def held_out(data: spec.DataSpec, data_dir: str | None, max_samples: int | None = None) -> datafiles.Images:
    """The held-out samples in their seeded order, at most `max_samples`, as float inputs."""
    images, _, held = _split(data, data_dir)
    if data.format in CIFAR_CLASSES:
        images = _load(data, data_dir, "test")
    held = held[:max_samples] if max_samples else held
    if not len(held):
        raise datafiles.DataError("the held-out split is empty: raise data.heldOutPercent")
    images, rows = _rows(images, held)
    rows = held if rows is None else rows[held]
    return datafiles.Images(as_inputs(images.inputs[rows]), images.labels[rows])

"""Readers of real datasets in their published on-disk formats, into uint8 image tensors; used by datasets.py.

Every reader returns `Images`: (N, 3, H, W) uint8 pixels and (N,) int64 labels, grey images repeated
over three channels, so the built-in models take them as they take synthetic images. Nothing is
downloaded: the files are on a volume, or ship inside a package (Digits, from scikit-learn).

    CIFAR-10, binary version   data_batch_1.bin .. data_batch_5.bin, test_batch.bin: records of 1 label byte + 3072 pixel bytes
    CIFAR-100, binary version  train.bin, test.bin: records of a coarse and a fine label byte + 3072 pixel bytes
    CIFAR, Python version      data_batch_1 .. 5 and test_batch (CIFAR-10), train and test (CIFAR-100): pickles
                               of {"data": uint8 (N, 3072), "labels" or "fine_labels": [N]}, as torchvision reads them
    ImageFolder                <root>/<class>/<image>.png|.jpg, classes in sorted order, as torchvision reads them
"""

from __future__ import annotations

import dataclasses
import io
import pathlib
import pickle

import numpy
import torch

CIFAR_SIDE = 32
CIFAR_PIXELS = 3 * CIFAR_SIDE * CIFAR_SIDE
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".ppm", ".webp")


class DataError(ValueError):
    """A dataset cannot be read; the message names the file and what to change."""


@dataclasses.dataclass(frozen=True)
class Images:
    """A labelled image set: pixels (N, C, H, W), uint8 (or float from a factory), and labels (N,) int64."""

    inputs: torch.Tensor
    labels: torch.Tensor

    def __len__(self) -> int:
        return int(self.labels.shape[0])


# ---------------------------------------------------------------------------------------------
# CIFAR

CIFAR_FILES = {
    # classes -> (label bytes per record, index of the label used, train files, test files), binary version
    10: (1, 0, [f"data_batch_{i}.bin" for i in range(1, 6)], ["test_batch.bin"]),
    100: (2, 1, ["train.bin"], ["test.bin"]),
}
CIFAR_PICKLES = {
    # classes -> (label key, train files, test files), Python version
    10: ("labels", [f"data_batch_{i}" for i in range(1, 6)], ["test_batch"]),
    100: ("fine_labels", ["train"], ["test"]),
}


def read_cifar(directory: pathlib.Path, classes: int, split: str) -> Images:
    """CIFAR-10 or CIFAR-100 (`classes`), split "train" or "test", from the binary or the Python version."""
    label_bytes, label_index, train, test = CIFAR_FILES[classes]
    names = train if split == "train" else test
    if all((directory / name).is_file() for name in names):
        return _cifar_binary([directory / name for name in names], label_bytes, label_index)
    key, train, test = CIFAR_PICKLES[classes]
    pickles = train if split == "train" else test
    if all((directory / name).is_file() for name in pickles):
        return _cifar_pickles([directory / name for name in pickles], key)
    raise DataError(f"{directory}: no CIFAR-{classes} {split} files: expected {', '.join(names)} (binary version) "
                    f"or {', '.join(pickles)} (Python version); set data.path to the directory that holds them")


def _cifar_binary(paths: list[pathlib.Path], label_bytes: int, label_index: int) -> Images:
    record = label_bytes + CIFAR_PIXELS
    inputs, labels = [], []
    for path in paths:
        raw = numpy.fromfile(path, dtype=numpy.uint8)
        if raw.size == 0 or raw.size % record:
            raise DataError(f"{path}: {raw.size} bytes is not a whole number of {record}-byte CIFAR records: "
                            "the file is truncated or of another format")
        rows = raw.reshape(-1, record)  # (N, labels + 3072)
        labels.append(torch.from_numpy(rows[:, label_index].astype(numpy.int64)))
        inputs.append(torch.from_numpy(rows[:, label_bytes:].copy()).view(-1, 3, CIFAR_SIDE, CIFAR_SIDE))
    return Images(torch.cat(inputs), torch.cat(labels))


class _ArraysOnly(pickle.Unpickler):
    """Unpickles numpy arrays, lists, dicts and scalars and nothing else: a pickle on a volume runs no code."""

    ALLOWED = {("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "_reconstruct"),
               ("numpy._core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "scalar"),
               ("numpy._core.multiarray", "scalar"),
               ("_codecs", "encode")}  # how protocol 2 writes bytes from Python 3: a pure function

    def find_class(self, module: str, name: str):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a CIFAR batch (arrays only)")
        return super().find_class(module, name)


def _cifar_pickles(paths: list[pathlib.Path], label_key: str) -> Images:
    inputs, labels = [], []
    for path in paths:
        try:
            batch = _ArraysOnly(io.BytesIO(path.read_bytes()), encoding="latin1").load()
            data = numpy.asarray(batch["data"], dtype=numpy.uint8).reshape(-1, 3, CIFAR_SIDE, CIFAR_SIDE)
            labels.append(torch.as_tensor(numpy.asarray(batch[label_key], dtype=numpy.int64)))
        except (pickle.UnpicklingError, KeyError, ValueError, TypeError, EOFError) as error:
            raise DataError(f"{path}: not a CIFAR batch of the Python version ({error})") from None
        inputs.append(torch.from_numpy(data.copy()))
        if labels[-1].shape[0] != inputs[-1].shape[0]:
            raise DataError(f"{path}: {inputs[-1].shape[0]} images but {labels[-1].shape[0]} labels")
    return Images(torch.cat(inputs), torch.cat(labels))


# ---------------------------------------------------------------------------------------------
# ImageFolder


def image_folder_classes(directory: pathlib.Path) -> list[str]:
    """The class directories of an ImageFolder, sorted: class i is the i-th name."""
    if not directory.is_dir():
        raise DataError(f"{directory}: not a directory; set data.path to the ImageFolder root (<root>/<class>/<image>)")
    classes = sorted(p.name for p in directory.iterdir() if p.is_dir() and not p.name.startswith("."))
    if len(classes) < 2:
        raise DataError(f"{directory}: an ImageFolder needs at least 2 class directories, found {len(classes)}")
    return classes


def _image_files(directory: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)


def image_folder_size(directory: pathlib.Path) -> tuple[int, int]:
    """(height, width) of the first image, in sorted order: the size every image is resized to."""
    from PIL import Image

    for name in image_folder_classes(directory):
        files = _image_files(directory / name)
        if files:
            with Image.open(files[0]) as image:
                return image.height, image.width
    raise DataError(f"{directory}: no images ({', '.join(IMAGE_SUFFIXES)}) under its class directories")


def read_image_folder(directory: pathlib.Path) -> Images:
    """Every image under <directory>/<class>/, decoded to RGB and resized to the first image's size."""
    from PIL import Image, UnidentifiedImageError

    height, width = image_folder_size(directory)
    inputs, labels = [], []
    for label, name in enumerate(image_folder_classes(directory)):
        for path in _image_files(directory / name):
            try:
                with Image.open(path) as image:
                    rgb = image.convert("RGB")
            except (UnidentifiedImageError, OSError) as error:
                raise DataError(f"{path}: cannot be decoded as an image ({error}); remove it or replace it") from None
            if rgb.size != (width, height):
                rgb = rgb.resize((width, height), Image.Resampling.BILINEAR)
            inputs.append(torch.from_numpy(numpy.asarray(rgb, dtype=numpy.uint8).copy()).permute(2, 0, 1))  # (3, H, W)
            labels.append(label)
    return Images(torch.stack(inputs), torch.tensor(labels, dtype=torch.int64))


# ---------------------------------------------------------------------------------------------
# Digits


DIGITS_SIDE = 8
DIGITS_CLASSES = 10


def read_digits() -> Images:
    """scikit-learn's handwritten digits (1797 8x8 images, 17 grey levels), scaled to 0..255 and made RGB."""
    from sklearn import datasets as sklearn_datasets  # slow to import: only ranks that read digits pay for it

    digits = sklearn_datasets.load_digits()
    grey = numpy.rint(digits.images * (255.0 / 16.0)).astype(numpy.uint8)  # (N, 8, 8)
    inputs = torch.from_numpy(grey).unsqueeze(1).expand(-1, 3, -1, -1).contiguous()  # (N, 3, 8, 8)
    return Images(inputs, torch.from_numpy(digits.target.astype(numpy.int64)))

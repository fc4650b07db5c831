"""Readers of real datasets in their published on-disk formats, into uint8 image tensors; used by datasets.py.

Every reader returns `Images`: (N, 3, H, W) uint8 pixels and (N,) int64 labels, grey images repeated
over three channels, so the built-in models take them as they take synthetic images. Nothing is
downloaded: the files are on a volume, or ship inside a package (Digits, from scikit-learn).

    CIFAR-10, binary version   data_batch_1.bin .. data_batch_5.bin, test_batch.bin: records of 1 label byte + 3072
                               pixel bytes
    CIFAR-100, binary version  train.bin, test.bin: records of a coarse and a fine label byte + 3072 pixel bytes
    CIFAR, Python version      data_batch_1 .. 5 and test_batch (CIFAR-10), train and test (CIFAR-100): pickles
                               of {"data": uint8 (N, 3072), "labels" or "fine_labels": [N]}, as torchvision reads them
    ImageFolder                <root>/<class>/<image>.png|.jpg, classes in sorted order, as torchvision reads them

A dataset's files come from whoever filled the volume: they are read, never trusted (docs/security.md).

    where     only files whose path, symlinks resolved, lies inside the data root (`inside`)
    CIFAR     each file at most MAX_CIFAR_FILE_BYTES, a split's files at most MAX_READ_BYTES, checked before
              reading; a Python batch is unpickled by batchpickle (bounded work, no code, nothing shared)
    images    an ImageFolder is listed (at most MAX_IMAGE_FILES files) and each worker decodes only the
              images it was given; each at most MAX_IMAGE_PIXELS, read from its header before decoding;
              the images of one read at most MAX_READ_BYTES of pixels, counted before decoding any
    errors    whatever a file does wrong ends in one DataError naming it
"""

from __future__ import annotations

import contextlib
import dataclasses
import pathlib
import warnings

import numpy
import torch

from ringleader.runtime import batchpickle

CIFAR_SIDE = 32
CIFAR_PIXELS = 3 * CIFAR_SIDE * CIFAR_SIDE
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".ppm", ".webp")
IMAGE_FORMATS = ("PNG", "JPEG", "MPO", "BMP", "GIF", "PPM", "WEBP")
"""The Pillow decoders an ImageFolder may use (MPO: a camera's JPEG); not Pillow's others, which include
EPS (decoded by running Ghostscript) and formats few training sets hold."""

MAX_CIFAR_FILE_BYTES = 256 * 2**20
"""Largest CIFAR file read. The largest published one, CIFAR-100's train file, is about 155 MB in either
version: room for a re-pickled copy, and a bound on what one file makes every worker allocate."""

MAX_IMAGE_PIXELS = 4096 * 4096
"""Most pixels (width x height, from the header, before decoding) of one ImageFolder image: 48 MiB decoded
as RGB. Far above the sizes models are trained on here, and 5x under Pillow's own decompression-bomb
warning (89 M pixels), which lets a 10 KB PNG of 9000x9000 decode to 243 MB."""

MAX_READ_BYTES = 512 * 2**20
"""Most bytes of pixels one read holds: a worker's training shard, and the held-out part the evaluating
worker reads besides, so at most 1 GiB a worker: half of a pod's default memory (2Gi), leaving the rest to
torch, the model and its batches. For CIFAR, the files of a split (all of CIFAR-10's train files: 154 MB)."""

MAX_IMAGE_FILES = 2_000_000
"""Most image files an ImageFolder may hold: every rank lists them all, to agree on the split. ImageNet's
1.28 M training images fit; the list costs about 100 bytes a file."""


class DataError(ValueError):
    """A dataset cannot be read; the message names the file and what to change."""


@dataclasses.dataclass(frozen=True)
class Images:
    """A labelled image set: pixels (N, C, H, W), uint8 (or float from a factory), and labels (N,) int64."""

    inputs: torch.Tensor
    labels: torch.Tensor

    def __len__(self) -> int:
        return int(self.labels.shape[0])


def inside(path: pathlib.Path, root: pathlib.Path) -> pathlib.Path:
    """`path` with its symlinks resolved, refused unless it lies inside `root` (resolved already)."""
    resolved = path.resolve()
    if not resolved.is_relative_to(root):
        raise DataError(f"{path}: resolves to {resolved}, outside the data directory {root}: a dataset's files "
                        "must stay inside it (a symlink may point only within it)")
    return resolved


def _cifar_sizes(paths: list[pathlib.Path]) -> None:
    """Refuse, before reading any, a file over MAX_CIFAR_FILE_BYTES, or files over MAX_READ_BYTES together."""
    total = 0
    for path in paths:
        size = path.stat().st_size
        if size > MAX_CIFAR_FILE_BYTES:
            raise DataError(f"{path}: {size:,} bytes, over the {MAX_CIFAR_FILE_BYTES:,} a CIFAR file may have "
                            "(the largest published one has 155 MB): not a CIFAR file")
        total += size
    if total > MAX_READ_BYTES:
        raise DataError(f"{paths[0].parent}: {len(paths)} files of {total:,} bytes in all, over the {MAX_READ_BYTES:,} "
                        "bytes one worker reads at once")


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


def read_cifar(directory: pathlib.Path, classes: int, split: str, root: pathlib.Path | None = None) -> Images:
    """CIFAR-10 or CIFAR-100 (`classes`), split "train" or "test", from the binary or the Python version.

    Its files must lie inside `root` (default: `directory`) once their symlinks are resolved."""
    root = (root or directory).resolve()
    label_bytes, label_index, train, test = CIFAR_FILES[classes]
    names = train if split == "train" else test
    if all((directory / name).is_file() for name in names):
        paths = [inside(directory / name, root) for name in names]
        _cifar_sizes(paths)
        return _cifar_binary(paths, label_bytes, label_index, classes)
    key, train, test = CIFAR_PICKLES[classes]
    pickles = train if split == "train" else test
    if all((directory / name).is_file() for name in pickles):
        paths = [inside(directory / name, root) for name in pickles]
        _cifar_sizes(paths)
        return _cifar_pickles(paths, key, classes)
    raise DataError(f"{directory}: no CIFAR-{classes} {split} files: expected {', '.join(names)} (binary version) "
                    f"or {', '.join(pickles)} (Python version); set data.path to the directory that holds them")


def _check_labels(path: pathlib.Path, labels: numpy.ndarray, classes: int) -> None:
    if labels.size and not 0 <= int(labels.min()) <= int(labels.max()) < classes:
        raise DataError(f"{path}: labels {int(labels.min())}..{int(labels.max())} are not all in 0..{classes - 1}: "
                        f"not a CIFAR-{classes} file")


def _cifar_binary(paths: list[pathlib.Path], label_bytes: int, label_index: int, classes: int) -> Images:
    record = label_bytes + CIFAR_PIXELS
    inputs, labels = [], []
    for path in paths:
        raw = numpy.fromfile(path, dtype=numpy.uint8)
        if raw.size == 0 or raw.size % record:
            raise DataError(f"{path}: {raw.size} bytes is not a whole number of {record}-byte CIFAR records: "
                            "the file is truncated or of another format")
        rows = raw.reshape(-1, record)  # (N, labels + 3072)
        _check_labels(path, rows[:, label_index], classes)
        labels.append(torch.from_numpy(rows[:, label_index].astype(numpy.int64)))
        inputs.append(torch.from_numpy(rows[:, label_bytes:].copy()).view(-1, 3, CIFAR_SIDE, CIFAR_SIDE))
    return Images(torch.cat(inputs), torch.cat(labels))


def _entry(batch: dict, key: str):
    """batch[key], the key a str (Python 2's, read as latin-1) or bytes (a batch re-pickled by Python 3)."""
    for candidate in (key, key.encode()):
        if candidate in batch:
            return batch[candidate]
    raise ValueError(f"no {key!r} entry")


def _batch_arrays(batch, label_key: str) -> tuple[numpy.ndarray, numpy.ndarray]:
    """(pixels (N, 3, 32, 32) uint8, labels (N,) int64) of an unpickled batch, its entries checked, not walked."""
    if not isinstance(batch, dict):
        raise ValueError(f"a {type(batch).__name__}, not a dict")
    data, labels = _entry(batch, "data"), _entry(batch, label_key)
    if not (isinstance(data, numpy.ndarray) and data.dtype == numpy.uint8
            and data.shape[1:] in ((CIFAR_PIXELS,), (3, CIFAR_SIDE, CIFAR_SIDE))):
        raise ValueError(f"'data' is not a uint8 array of (N, {CIFAR_PIXELS}) pixels")
    if isinstance(labels, numpy.ndarray) and labels.ndim == 1 and labels.dtype.kind in "iu":
        labels = labels.astype(numpy.int64)
    elif isinstance(labels, list) and all(type(label) is int for label in labels):  # a flat list: no nesting
        labels = numpy.array(labels, dtype=numpy.int64)
    else:
        raise ValueError(f"{label_key!r} is not a list of integers")
    if len(labels) != len(data):
        raise ValueError(f"{len(data)} images but {len(labels)} labels")
    return data.reshape(-1, 3, CIFAR_SIDE, CIFAR_SIDE), labels


def _cifar_pickles(paths: list[pathlib.Path], label_key: str, classes: int) -> Images:
    inputs, labels = [], []
    for path in paths:
        try:
            data, label = _batch_arrays(batchpickle.load(path.read_bytes()), label_key)
        except Exception as error:  # noqa: BLE001 - a malformed or hostile pickle raises any type (struct.error, EOFError, ...)
            raise DataError(f"{path}: not a CIFAR batch of the Python version ({str(error)[:300]})") from None
        _check_labels(path, label, classes)
        inputs.append(torch.from_numpy(data.copy()))
        labels.append(torch.from_numpy(label))
    return Images(torch.cat(inputs), torch.cat(labels))


# ---------------------------------------------------------------------------------------------
# ImageFolder


@dataclasses.dataclass(frozen=True, eq=False)
class ImageFiles:
    """An ImageFolder listed, not decoded: every rank lists it to agree on the split; `read` decodes a part."""

    directory: pathlib.Path
    paths: tuple[str, ...]  # resolved, inside the data root; class by class, sorted
    labels: torch.Tensor  # (N,) int64
    classes: tuple[str, ...]
    height: int  # the first image's size, which every image is resized to
    width: int

    def __len__(self) -> int:
        return len(self.paths)

    def read(self, indices: torch.Tensor) -> Images:
        """The images at `indices` (dataset indices, in that order), decoded and resized; no other file is read."""
        count, height, width = len(indices), self.height, self.width
        needed = count * 3 * height * width
        if needed > MAX_READ_BYTES:
            raise DataError(f"{self.directory}: {count} images of {height}x{width} (the first image's size, which "
                            f"every image is resized to) are {needed:,} bytes decoded, over the {MAX_READ_BYTES:,} "
                            "one worker reads at once: use more workers, smaller images, or hold out less")
        inputs = torch.empty((count, 3, height, width), dtype=torch.uint8)  # filled in place: no second copy
        for row, index in enumerate(indices.tolist()):
            inputs[row] = _decode(pathlib.Path(self.paths[index]), height, width)
        return Images(inputs, self.labels[indices])


def _classes(directory: pathlib.Path) -> list[str]:
    """The class directories of an ImageFolder, sorted: class i is the i-th name."""
    if not directory.is_dir():
        raise DataError(f"{directory}: not a directory; set data.path to the ImageFolder root (<root>/<class>/<image>)")
    classes = sorted(p.name for p in directory.iterdir() if p.is_dir() and not p.name.startswith("."))
    if len(classes) < 2:
        raise DataError(f"{directory}: an ImageFolder needs at least 2 class directories, found {len(classes)}")
    return classes


def _image_files(directory: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)


def list_image_folder(directory: pathlib.Path, root: pathlib.Path | None = None) -> ImageFiles:
    """The images under <directory>/<class>/, listed, and the first one's size from its header; none decoded.

    Every file must lie inside `root` (default: `directory`) once its symlinks are resolved."""
    root = (root or directory).resolve()
    classes = _classes(directory)
    paths: list[str] = []
    labels: list[int] = []
    for label, name in enumerate(classes):
        for path in _image_files(directory / name):
            paths.append(str(inside(path, root)))
            labels.append(label)
            if len(paths) > MAX_IMAGE_FILES:
                raise DataError(f"{directory}: more than {MAX_IMAGE_FILES:,} images, the most an ImageFolder may hold")
    if not paths:
        raise DataError(f"{directory}: no images ({', '.join(IMAGE_SUFFIXES)}) under its class directories")
    with _open_image(pathlib.Path(paths[0])) as first:
        height, width = first.height, first.width
    return ImageFiles(directory, tuple(paths), torch.tensor(labels, dtype=torch.int64), tuple(classes), height, width)


def read_image_folder(directory: pathlib.Path, root: pathlib.Path | None = None) -> Images:
    """Every image under <directory>/<class>/, decoded to RGB and resized to the first image's size."""
    files = list_image_folder(directory, root)
    return files.read(torch.arange(len(files)))


@contextlib.contextmanager
def _decoding(path: pathlib.Path):
    """Whatever Pillow raises on `path` as one DataError naming it; its decompression-bomb warning as an error."""
    from PIL import Image

    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)  # Pillow's warning names no file
        try:
            yield
        except DataError:
            raise
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as error:
            raise DataError(f"{path}: refused as a decompression bomb ({error}); an image may have at most "
                            f"{MAX_IMAGE_PIXELS:,} pixels") from None
        except Exception as error:  # noqa: BLE001 - a decoder on a broken or hostile file raises any type: the file is the news
            raise DataError(f"{path}: cannot be decoded as an image ({type(error).__name__}: {error}); "
                            "remove it or replace it") from None


def _open_image(path: pathlib.Path):
    """The image at `path`, opened lazily (its header read, no pixel decoded), its size within MAX_IMAGE_PIXELS."""
    from PIL import Image

    with _decoding(path):
        image = Image.open(path, formats=IMAGE_FORMATS)
    width, height = image.size
    if width * height > MAX_IMAGE_PIXELS:
        image.close()
        raise DataError(f"{path}: {width}x{height} is {width * height:,} pixels, over the limit of "
                        f"{MAX_IMAGE_PIXELS:,} per image (read from its header, before decoding): "
                        "shrink it or remove it")
    return image


def _decode(path: pathlib.Path, height: int, width: int) -> torch.Tensor:
    """The image at `path` as (3, height, width) uint8 RGB, resized if it is of another size."""
    from PIL import Image

    with _open_image(path) as image, _decoding(path):
        rgb = image.convert("RGB")
        if rgb.size != (width, height):
            rgb = rgb.resize((width, height), Image.Resampling.BILINEAR)
        return torch.from_numpy(numpy.array(rgb, dtype=numpy.uint8)).permute(2, 0, 1)


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

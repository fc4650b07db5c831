"""Real data from a volume someone else filled: every hostile file is built here, small, and refused fast with one
DataError naming it, within the loaders' limits; no file outside the data directory is read."""

from __future__ import annotations

import pathlib
import pickle
import struct
import time

import numpy
import pytest
import torch
from PIL import Image

from ringleader.api import spec as spec_
from ringleader.runtime import batchpickle, datafiles, datasets

CIFAR10_TEST = "test_batch"


def cifar_batch(count: int = 4) -> dict:
    rng = numpy.random.default_rng(0)
    return {"data": rng.integers(0, 256, (count, 3072), dtype=numpy.uint8),
            "labels": rng.integers(0, 10, count).tolist(), "batch_label": "testing batch 1 of 1",
            "filenames": [f"img_{i}.png" for i in range(count)]}


def shared_nested_list(depth: int) -> list:
    """2**depth zeros nested `depth` deep, each level the previous one twice: pickled, a few hundred bytes."""
    level = [0, 0]
    for _ in range(depth - 1):
        level = [level, level]
    return level


def read_test_batch(directory):
    return datafiles.read_cifar(directory, 10, "test")


# ---------------------------------------------------------------------------------------------
# CIFAR, Python version: bounded unpickling


@pytest.mark.parametrize("entry", ["data", "labels"])
@pytest.mark.parametrize("depth", [2, 24])
def test_a_pickle_of_shared_nested_lists_is_refused_before_it_unfolds(tmp_path, entry, depth):
    batch = cifar_batch()
    batch[entry] = shared_nested_list(depth)
    (tmp_path / CIFAR10_TEST).write_bytes(pickle.dumps(batch, protocol=2))
    assert len(pickle.dumps(batch[entry], protocol=2)) < 250  # 16 M elements at depth 24 (unbounded: 3 s, 500 MB)
    start = time.perf_counter()
    with pytest.raises(datafiles.DataError, match=f"{CIFAR10_TEST}: not a CIFAR batch .*a list is used twice"):
        read_test_batch(tmp_path)
    assert time.perf_counter() - start < 1.0


def hand_assembled_tuple_bomb(depth: int) -> bytes:
    """{t: 0} where t is () paired with itself `depth` times through the memo: hashing t walks 2**depth tuples."""
    ops = [b"\x80\x02}", b")q\x00"]  # PROTO 2, EMPTY_DICT; EMPTY_TUPLE, BINPUT 0
    for i in range(depth):
        ops.append(b"h" + bytes([i]) + b"h" + bytes([i]) + b"\x86q" + bytes([i + 1]))  # BINGET i twice, TUPLE2, BINPUT
    ops.append(b"K\x00s.")  # BININT1 0, SETITEM (hashes the key), STOP
    return b"".join(ops)


def test_a_dict_key_of_shared_tuples_is_refused_before_it_is_hashed(tmp_path):
    (tmp_path / CIFAR10_TEST).write_bytes(hand_assembled_tuple_bomb(24))
    with pytest.raises(datafiles.DataError, match="a tuple is used twice"):
        read_test_batch(tmp_path)


class HugeArray:
    """Pickles as numpy's own reconstruction of an empty array, but of 2**40 bytes: a terabyte, if allocated."""

    def __reduce__(self):
        reconstruct = numpy.empty(0).__reduce__()[0]
        return reconstruct, (numpy.ndarray, (2**40,), b"b")


HUGE_NEWOBJ = (b"\x80\x02}X\x04\x00\x00\x00data"  # PROTO 2, EMPTY_DICT, "data"
               b"cnumpy\nndarray\n\x8a\x06\x00\x00\x00\x00\x00\x01\x85\x85\x81"  # ndarray.__new__(ndarray, (2**40,))
               b"s.")  # SETITEM, STOP


@pytest.mark.parametrize("how", ["_reconstruct", "newobj"])
def test_numpy_reconstruction_allocates_nothing_the_file_does_not_carry(tmp_path, how):
    if how == "_reconstruct":
        batch = cifar_batch()
        batch["data"] = HugeArray()
        raw = pickle.dumps(batch, protocol=2)
    else:
        raw = HUGE_NEWOBJ
    (tmp_path / CIFAR10_TEST).write_bytes(raw)
    with pytest.raises(datafiles.DataError, match=f"{CIFAR10_TEST}: not a CIFAR batch"):
        read_test_batch(tmp_path)


def test_an_array_whose_bytes_do_not_match_its_shape_is_refused(tmp_path):
    raw = pickle.dumps(cifar_batch(), protocol=2)
    # The shape (4, 3072) as protocol 2 writes it, BININT1 4 and BININT2 3072, made to claim 256 rows.
    raw = raw.replace(b"K\x04M\x00\x0c", b"M\x00\x01M\x00\x0c", 1)
    assert b"M\x00\x01M\x00\x0c" in raw
    (tmp_path / CIFAR10_TEST).write_bytes(raw)
    with pytest.raises(datafiles.DataError, match="needs its 786432 elements' bytes"):
        read_test_batch(tmp_path)


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_real_batches_of_every_protocol_are_read_exactly(tmp_path, protocol):
    batch = cifar_batch()
    batch["labels"] = [numpy.int64(label) for label in batch["labels"]]  # numpy scalars: numpy's scalar()
    (tmp_path / CIFAR10_TEST).write_bytes(pickle.dumps(batch, protocol=protocol))
    images = read_test_batch(tmp_path)
    assert torch.equal(images.inputs.reshape(4, -1), torch.from_numpy(cifar_batch()["data"]))
    assert images.labels.tolist() == cifar_batch()["labels"]


def python2_batch(pixels: bytes, label: int) -> bytes:
    """One record as CIFAR's own files lay it out: Python 2's cPickle, protocol 2, str (U, T) read as latin-1."""
    return (b"\x80\x02}q\x01(U\x04dataq\x02cnumpy.core.multiarray\n_reconstruct\nq\x03cnumpy\nndarray\nq\x04K\x00\x85"
            b"U\x01b\x87Rq\x05(K\x01K\x01M\x00\x0c\x86cnumpy\ndtype\nq\x06U\x02u1K\x00K\x01\x87Rq\x07(K\x03U\x01|NNN"
            b"J\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb\x89T" + struct.pack("<I", len(pixels)) + pixels
            + b"tbU\x06labelsq\x08]q\t(K" + bytes([label]) + b"eU\tfilenamesq\n]q\x0bU\x08cat1.pngq\x0ca"
            b"U\x0bbatch_labelq\rU\x05testsq\x0eu.")


def test_a_batch_as_cifars_own_files_lay_it_out_is_read(tmp_path):
    pixels = bytes(range(256)) * 12
    (tmp_path / CIFAR10_TEST).write_bytes(python2_batch(pixels, 3))
    images = read_test_batch(tmp_path)
    assert images.inputs.reshape(-1).tolist() == list(pixels) and images.labels.tolist() == [3]


def test_a_batch_re_pickled_with_bytes_keys_is_read(tmp_path):
    batch = {key.encode(): value for key, value in cifar_batch().items()}
    (tmp_path / CIFAR10_TEST).write_bytes(pickle.dumps(batch, protocol=4))
    assert len(read_test_batch(tmp_path)) == 4


def test_a_pickle_runs_at_most_its_operations(tmp_path, monkeypatch):
    (tmp_path / CIFAR10_TEST).write_bytes(pickle.dumps(cifar_batch(), protocol=2))
    monkeypatch.setattr(batchpickle, "MAX_OPERATIONS", 20)
    with pytest.raises(datafiles.DataError, match="more than 20 pickle operations"):
        read_test_batch(tmp_path)


def test_a_cifar_file_over_the_limit_is_refused_unread(tmp_path):
    with open(tmp_path / "test_batch.bin", "wb") as file:
        file.truncate(datafiles.MAX_CIFAR_FILE_BYTES + 3073)  # sparse: nothing on disk, and nothing read
    with pytest.raises(datafiles.DataError, match=r"test_batch.bin: 268,438,529 bytes, over the 268,435,456"):
        read_test_batch(tmp_path)


def test_a_cifar_split_over_the_read_budget_is_refused_unread(tmp_path, monkeypatch):
    for name in [f"data_batch_{i}.bin" for i in range(1, 6)]:
        (tmp_path / name).write_bytes(bytes(2 * 3073))
    monkeypatch.setattr(datafiles, "MAX_READ_BYTES", 9 * 3073)
    with pytest.raises(datafiles.DataError, match="5 files of 30,730 bytes in all, over the 27,657 bytes one worker"):
        datafiles.read_cifar(tmp_path, 10, "train")


def test_a_label_outside_the_classes_is_refused(tmp_path):
    (tmp_path / "test_batch.bin").write_bytes(bytes([10]) + bytes(3072))  # CIFAR-10 labels are 0..9
    with pytest.raises(datafiles.DataError, match=r"test_batch.bin: labels 10..10 are not all in 0..9"):
        read_test_batch(tmp_path)


# ---------------------------------------------------------------------------------------------
# ImageFolder: decoded pixels bounded per image and per read; errors name the file


def image_folder(root, first: Image.Image | None = None, per_class: int = 2, side: int = 4) -> None:
    """root/cat and root/dog with small RGB PNGs; `first` (if given) is cat/000.png, the size-setting image."""
    rng = numpy.random.default_rng(0)
    for name in ("cat", "dog"):
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=numpy.uint8)).save(root / name / f"{i:03d}.png")
    if first is not None:
        first.save(root / "cat" / "000.png")


def test_a_tiny_png_of_9000x9000_is_refused_from_its_header(tmp_path):
    image_folder(tmp_path, first=Image.new("1", (9000, 9000)))
    assert (tmp_path / "cat" / "000.png").stat().st_size < 20_000  # 243 MB decoded as RGB
    start = time.perf_counter()
    with pytest.raises(datafiles.DataError, match=r"cat/000.png: 9000x9000 is 81,000,000 pixels, over the limit "
                                                  r"of 16,777,216 per image"):
        datafiles.read_image_folder(tmp_path)
    assert time.perf_counter() - start < 1.0


def test_a_large_image_after_the_first_is_refused_before_decoding_too(tmp_path):
    image_folder(tmp_path)
    Image.new("1", (5000, 5000)).save(tmp_path / "dog" / "999.png")
    with pytest.raises(datafiles.DataError, match=r"dog/999.png: 5000x5000 is 25,000,000 pixels"):
        datafiles.read_image_folder(tmp_path)


@pytest.mark.parametrize("side", [9500, 13500])  # over Pillow's warning (89 M pixels), over its error (179 M)
def test_a_pillow_decompression_bomb_names_the_file(tmp_path, side):
    image_folder(tmp_path, first=Image.new("1", (side, side)))
    with pytest.raises(datafiles.DataError, match=r"cat/000.png: refused as a decompression bomb .*at most 16,777,216"):
        datafiles.read_image_folder(tmp_path)


@pytest.mark.parametrize("name", ["cat/000.png", "dog/001.png"])  # the size-setting first image, and another
def test_a_file_that_is_no_image_is_named(tmp_path, name):
    image_folder(tmp_path)
    (tmp_path / name).write_bytes(b"<html>not an image</html>")
    with pytest.raises(datafiles.DataError, match=f"{name}: cannot be decoded as an image"):
        datafiles.read_image_folder(tmp_path)
    if name == "cat/000.png":  # every rank reads its header for the model's input shape
        with pytest.raises(datafiles.DataError, match=f"{name}: cannot be decoded as an image"):
            datasets.describe(spec_.DataSpec(format="ImageFolder", path=str(tmp_path)), None)


def test_only_pillows_decoders_for_the_image_suffixes_are_used(tmp_path):
    image_folder(tmp_path)
    Image.new("RGB", (4, 4)).save(tmp_path / "dog" / "001.png", format="TIFF")  # a TIFF named .png
    with pytest.raises(datafiles.DataError, match="dog/001.png: cannot be decoded as an image"):
        datafiles.read_image_folder(tmp_path)


def test_a_worker_decodes_its_own_shard_only_and_batches_are_unchanged(tmp_path):
    image_folder(tmp_path, per_class=6)
    data = spec_.DataSpec(format="ImageFolder", path=str(tmp_path), heldOutPercent=20, synthetic={"seed": 5})
    whole = datafiles.read_image_folder(tmp_path)
    files, train, held = datasets._split(data, None)
    assert isinstance(files, datafiles.ImageFiles) and len(files) == 12  # listed by every rank, decoded by none
    first = datasets.shard(data, None, 0, 2)
    for step in range(3):
        inputs, labels = first.batch(step, 4)
        index = first.sample_indices(step, 4)
        assert torch.equal(inputs, datasets.as_inputs(whole.inputs[index])) and torch.equal(labels, whole.labels[index])
    held_out = datasets.held_out(data, None)
    assert torch.equal(held_out.inputs, datasets.as_inputs(whole.inputs[held]))
    # An image of the other worker's shard goes bad: this worker never opens it, the other one names it.
    other = train[len(train) // 2:]
    broken = files.paths[int(other[0])]
    pathlib.Path(broken).write_bytes(b"broken")
    assert len(datasets.shard(data, None, 0, 2)) == len(first)
    with pytest.raises(datafiles.DataError, match=f"{broken}: cannot be decoded"):
        datasets.shard(data, None, 1, 2)


def test_a_read_holds_at_most_its_budget_of_pixels(tmp_path, monkeypatch):
    image_folder(tmp_path, per_class=5)  # 10 images of 4x4: 48 bytes each
    data = spec_.DataSpec(format="ImageFolder", path=str(tmp_path), heldOutPercent=20)
    monkeypatch.setattr(datafiles, "MAX_READ_BYTES", 4 * 48)
    assert len(datasets.shard(data, None, 0, 2)) == 4  # 4 images: exactly the budget
    with pytest.raises(datafiles.DataError, match=r"8 images of 4x4 .* are 384 bytes decoded, over the 192 one worker"):
        datasets.shard(data, None, 0, 1)


def test_an_image_folder_lists_at_most_its_files(tmp_path, monkeypatch):
    image_folder(tmp_path, per_class=3)
    monkeypatch.setattr(datafiles, "MAX_IMAGE_FILES", 5)
    with pytest.raises(datafiles.DataError, match="more than 5 images"):
        datafiles.list_image_folder(tmp_path)


# ---------------------------------------------------------------------------------------------
# Paths: data.path stays inside the data directory, and so does every file read


def test_a_relative_data_path_may_not_leave_the_data_directory(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "data" / "link").symlink_to(tmp_path / "elsewhere")
    for path in ("../elsewhere", "link", "cifar/../../elsewhere"):
        with pytest.raises(datafiles.DataError, match=f"data.path '{path}' resolves to .*elsewhere, outside the data "
                                                      "directory .*data: a relative data.path must stay inside it"):
            datasets.resolve(spec_.DataSpec(format="CIFAR10", path=path), str(tmp_path / "data"))
    (tmp_path / "data" / "cifar").mkdir()
    (tmp_path / "data" / "inner").symlink_to(tmp_path / "data" / "cifar")
    root = (tmp_path / "data").resolve()
    assert datasets.resolve(spec_.DataSpec(format="CIFAR10", path="inner"), str(tmp_path / "data")) == (
        root / "cifar", root)


def test_an_image_symlinked_out_of_the_data_directory_is_refused(tmp_path):
    image_folder(tmp_path / "data" / "pets")
    image_folder(tmp_path / "secret")
    (tmp_path / "data" / "pets" / "dog" / "inside.png").symlink_to(tmp_path / "data" / "pets" / "cat" / "001.png")
    data = spec_.DataSpec(format="ImageFolder", path="pets")
    assert datasets.describe(data, str(tmp_path / "data")).shape == (3, 4, 4)  # a symlink within it is fine
    (tmp_path / "data" / "pets" / "dog" / "outside.png").symlink_to(tmp_path / "secret" / "cat" / "000.png")
    with pytest.raises(datafiles.DataError, match=r"dog/outside.png: resolves to .*secret/cat/000.png, outside "
                                                  r"the data directory .*data: a dataset's files must stay inside it"):
        datafiles.list_image_folder(tmp_path / "data" / "pets", (tmp_path / "data").resolve())


def test_a_cifar_file_symlinked_out_of_its_directory_is_refused(tmp_path):
    (tmp_path / "cifar").mkdir()
    (tmp_path / "test_batch.bin").write_bytes(bytes(3073))
    (tmp_path / "cifar" / "test_batch.bin").symlink_to(tmp_path / "test_batch.bin")
    with pytest.raises(datafiles.DataError, match="cifar/test_batch.bin: resolves to .* outside the data directory"):
        read_test_batch(tmp_path / "cifar")  # an absolute data.path: the directory is its own root
    assert len(datafiles.read_cifar(tmp_path / "cifar", 10, "test", root=tmp_path)) == 1

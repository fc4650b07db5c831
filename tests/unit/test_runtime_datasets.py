"""Real datasets: files written here in CIFAR's and ImageFolder's real formats are read back exactly, and every
worker gets a disjoint, seeded shard; the held-out split never overlaps training."""

from __future__ import annotations

import pickle

import numpy
import pytest
import torch
from PIL import Image

from ringleader.api import spec as spec_
from ringleader.contract import keys
from ringleader.runtime import datafiles, datasets, evaluation, models


def cifar_records(count: int, classes: int, seed: int) -> tuple[numpy.ndarray, numpy.ndarray]:
    rng = numpy.random.default_rng(seed)
    return rng.integers(0, 256, (count, 3072), dtype=numpy.uint8), rng.integers(0, classes, count, dtype=numpy.uint8)


def write_cifar10_binary(directory, per_file: int = 6) -> tuple[numpy.ndarray, numpy.ndarray]:
    """data_batch_1..5.bin and test_batch.bin as the binary version lays them out: label byte, 3072 pixels."""
    pixels, labels = [], []
    for index, name in enumerate([f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]):
        data, label = cifar_records(per_file, 10, index)
        (directory / name).write_bytes(numpy.concatenate([label[:, None], data], axis=1).tobytes())
        pixels.append(data)
        labels.append(label)
    return numpy.concatenate(pixels), numpy.concatenate(labels)


def test_cifar10_binary_batches_are_read_record_by_record(tmp_path):
    pixels, labels = write_cifar10_binary(tmp_path)
    train = datafiles.read_cifar(tmp_path, 10, "train")
    test = datafiles.read_cifar(tmp_path, 10, "test")
    assert train.inputs.shape == (30, 3, 32, 32) and train.inputs.dtype == torch.uint8
    assert torch.equal(train.inputs.reshape(30, -1), torch.from_numpy(pixels[:30]))
    assert torch.equal(train.labels, torch.from_numpy(labels[:30].astype(numpy.int64)))
    assert torch.equal(test.labels, torch.from_numpy(labels[30:].astype(numpy.int64)))
    # The red plane comes first in a record: pixel (0, 0) of channel 1 is byte 1024.
    assert train.inputs[0, 1, 0, 0] == pixels[0, 1024]


def test_cifar100_binary_uses_the_fine_label(tmp_path):
    data, fine = cifar_records(5, 100, 7)
    coarse = fine // 5
    for name in ("train.bin", "test.bin"):
        (tmp_path / name).write_bytes(numpy.concatenate([coarse[:, None], fine[:, None], data], axis=1).tobytes())
    images = datafiles.read_cifar(tmp_path, 100, "train")
    assert torch.equal(images.labels, torch.from_numpy(fine.astype(numpy.int64)))
    assert torch.equal(images.inputs.reshape(5, -1), torch.from_numpy(data))


def test_cifar_python_version_pickles_are_read_and_code_in_them_is_refused(tmp_path):
    data, labels = cifar_records(4, 10, 1)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        with open(tmp_path / name, "wb") as file:
            pickle.dump({"data": data, "labels": labels.tolist(), "batch_label": "testing"}, file, protocol=2)
    images = datafiles.read_cifar(tmp_path, 10, "train")
    assert images.inputs.shape == (20, 3, 32, 32)
    assert images.labels.tolist() == labels.tolist() * 5

    class Hostile:
        def __reduce__(self):
            return (print, ("ran",))

    with open(tmp_path / "test_batch", "wb") as file:
        pickle.dump({"data": data, "labels": Hostile()}, file)
    with pytest.raises(datafiles.DataError, match="builtins.print is not allowed"):
        datafiles.read_cifar(tmp_path, 10, "test")


def test_cifar_errors_name_the_missing_files_and_a_truncated_one(tmp_path):
    with pytest.raises(datafiles.DataError, match="data_batch_1.bin"):
        datafiles.read_cifar(tmp_path, 10, "train")
    write_cifar10_binary(tmp_path)
    (tmp_path / "data_batch_3.bin").write_bytes(b"\x00" * 3000)
    with pytest.raises(datafiles.DataError, match="data_batch_3.bin: 3000 bytes"):
        datafiles.read_cifar(tmp_path, 10, "train")


def write_image_folder(root, counts: dict[str, int], size=(6, 5)) -> dict[str, list[numpy.ndarray]]:
    """PNGs in root/<class>/; the first class's first image sets the size, one grey image of another size."""
    written: dict[str, list[numpy.ndarray]] = {}
    rng = numpy.random.default_rng(0)
    for name, count in counts.items():
        (root / name).mkdir(parents=True)
        for i in range(count):
            pixels = rng.integers(0, 256, (size[0], size[1], 3), dtype=numpy.uint8)
            Image.fromarray(pixels).save(root / name / f"{i:03d}.png")
            written.setdefault(name, []).append(pixels)
    Image.fromarray(rng.integers(0, 256, (9, 9), dtype=numpy.uint8)).save(root / "zebra" / "grey.png")
    return written


def test_image_folder_reads_classes_in_order_decodes_pngs_and_resizes_to_the_first(tmp_path):
    written = write_image_folder(tmp_path, {"cat": 3, "dog": 2, "zebra": 1})
    images = datafiles.read_image_folder(tmp_path)
    assert images.labels.tolist() == [0, 0, 0, 1, 1, 2, 2]  # zebra: 000.png, then grey.png
    assert images.inputs.shape == (7, 3, 6, 5)
    assert torch.equal(images.inputs[3], torch.from_numpy(written["dog"][0]).permute(2, 0, 1))
    grey = images.inputs[6]
    assert torch.equal(grey[0], grey[1]) and torch.equal(grey[1], grey[2])  # resized, repeated over RGB
    described = datasets.describe(spec_.DataSpec(format="ImageFolder", path=str(tmp_path)), None)
    assert described == models.InputSpec(models.IMAGE, (3, 6, 5), 3)


def test_image_folder_refuses_a_file_that_is_no_image(tmp_path):
    write_image_folder(tmp_path, {"cat": 1, "dog": 1, "zebra": 1})
    (tmp_path / "dog" / "broken.png").write_bytes(b"not a png")
    with pytest.raises(datafiles.DataError, match="broken.png: cannot be decoded"):
        datafiles.read_image_folder(tmp_path)


def test_digits_ship_inside_the_image_as_rgb_8x8():
    images = datafiles.read_digits()
    assert images.inputs.shape == (1797, 3, 8, 8) and images.inputs.dtype == torch.uint8
    assert sorted(set(images.labels.tolist())) == list(range(10))
    assert int(images.inputs.max()) == 255


DIGITS = spec_.DataSpec(format="Digits", heldOutPercent=20, synthetic={"seed": 3})


def test_shards_are_disjoint_cover_the_training_part_and_miss_the_held_out_one():
    shards = [datasets.shard(DIGITS, None, w, 3) for w in range(3)]
    owned = [set(s.indices.tolist()) for s in shards]
    assert all(not (a & b) for i, a in enumerate(owned) for b in owned[i + 1:])
    held = datasets.held_out(DIGITS, None)
    assert len(held) == 360 and sum(map(len, owned)) == 1797 - 360
    _, train, held_indices = datasets._split(DIGITS, None)
    assert set(train.tolist()) == set.union(*owned) and not set(held_indices.tolist()) & set.union(*owned)


def test_a_shard_walks_every_sample_once_per_epoch_in_a_seeded_order_that_changes_by_epoch():
    shard = datasets.shard(DIGITS, None, 1, 3)
    batch, length = 16, len(shard)
    first_epoch = torch.cat([shard.sample_indices(step, batch) for step in range(length // batch)])
    assert len(set(first_epoch.tolist())) == len(first_epoch)  # no repeat within an epoch
    assert torch.equal(shard.epoch_order(0), datasets.shard(DIGITS, None, 1, 3).epoch_order(0))  # seeded
    assert not torch.equal(shard.epoch_order(0), shard.epoch_order(1))  # reshuffled
    other_seed = datasets.shard(DIGITS.model_copy(update={"synthetic": spec_.SyntheticData(seed=4)}), None, 1, 3)
    assert not torch.equal(shard.epoch_order(0), other_seed.epoch_order(0))
    inputs, labels = shard.batch(length // batch, batch)  # spans the end of epoch 0 and the start of epoch 1
    assert inputs.shape == (batch, 3, 8, 8) and inputs.dtype == torch.float32 and labels.shape == (batch,)


def test_cifar_holds_out_its_test_batch(tmp_path):
    write_cifar10_binary(tmp_path)
    data = spec_.DataSpec(format="CIFAR10", path=tmp_path.name, heldOutPercent=50)
    shards = [datasets.shard(data, str(tmp_path.parent), w, 2) for w in range(2)]
    assert sum(map(len, shards)) == 30  # every training record: heldOutPercent is for formats without a test split
    held = datasets.held_out(data, str(tmp_path.parent), max_samples=4)
    assert len(held) == 4
    test = datafiles.read_cifar(tmp_path, 10, "test")
    assert all(any(torch.equal(datasets.as_inputs(row), x) for row in test.inputs) for x in held.inputs)


def test_a_relative_path_needs_a_data_directory():
    with pytest.raises(datafiles.DataError, match="set data.volume in a cluster"):
        datasets.resolve(spec_.DataSpec(format="CIFAR10", path="cifar"), None)


def make_tensors():
    generator = torch.Generator().manual_seed(0)
    return torch.randn(40, 3, 4, 4, generator=generator), torch.arange(40) % 5


def not_a_pair():
    return [1, 2, 3]


def test_a_factory_dataset_is_split_like_the_others_and_a_wrong_return_is_named():
    data = spec_.DataSpec(format="Factory", factory=f"{__name__}:make_tensors", heldOutPercent=25)
    assert datasets.describe(data, None) == models.InputSpec(models.IMAGE, (3, 4, 4), 5)
    assert len(datasets.held_out(data, None)) == 10 and len(datasets.shard(data, None, 0, 2)) == 15
    wrong = spec_.DataSpec(format="Factory", factory=f"{__name__}:not_a_pair")
    with pytest.raises(datafiles.DataError, match="must return a pair"):
        datasets.describe(wrong, None)


def test_evaluation_measures_loss_and_accuracy_of_the_model_it_is_given():
    held = datafiles.Images(torch.randn(30, 3, 4, 4), torch.arange(30) % 3)
    model = models.MLP(48, 3)
    metrics = evaluation.evaluate(model, held, torch.device("cpu"))
    with torch.no_grad():
        logits = model(held.inputs)
    assert metrics[keys.EVAL_ACCURACY] == pytest.approx(float((logits.argmax(1) == held.labels).float().mean()))
    assert metrics[keys.EVAL_LOSS] == pytest.approx(float(models.loss(logits, held.labels)), rel=1e-5)
    assert model.training
    target = spec_.Target(accuracyPercent=50)
    assert evaluation.reached(target, {keys.EVAL_ACCURACY: 0.5, keys.EVAL_LOSS: 9.0})
    assert not evaluation.reached(target, {keys.EVAL_ACCURACY: 0.49, keys.EVAL_LOSS: 0.0})
    assert evaluation.reached(spec_.Target(loss=0.5), {keys.EVAL_ACCURACY: 0.0, keys.EVAL_LOSS: 0.5})
    assert [s for s in range(10) if evaluation.due(s, 4, 10)] == [3, 7, 9]

"""Synthetic data is deterministic, sliced per worker, bounded in memory, and learnable."""

import torch

from ringleader.api import spec as spec_
from ringleader.runtime import data, models

SYNTHETIC = spec_.SyntheticData(samples=100, imageSize=8, numClasses=4, sequenceLength=6, seed=1)
IMAGES = models.InputSpec(models.IMAGE, (3, 8, 8), 4)
TOKENS = models.InputSpec(models.TOKENS, (6,), 4)


def test_batches_have_the_models_shapes():
    inputs, labels = data.SyntheticDataset(SYNTHETIC, IMAGES).batch(0, 5)
    assert inputs.shape == (5, 3, 8, 8) and inputs.dtype == torch.float32
    assert labels.shape == (5,) and labels.dtype == torch.int64 and 0 <= labels.min() and labels.max() < 4
    tokens, targets = data.SyntheticDataset(SYNTHETIC, TOKENS).batch(0, 5)
    assert tokens.shape == targets.shape == (5, 6) and tokens.dtype == torch.int64
    # Targets are the sequence shifted by one: next-token prediction.
    assert torch.equal(tokens[:, 1:], targets[:, :-1])


def test_the_same_step_gives_the_same_batch_on_every_run():
    first, again = data.SyntheticDataset(SYNTHETIC, IMAGES), data.SyntheticDataset(SYNTHETIC, IMAGES)
    for step in (0, 7):
        assert all(torch.equal(a, b) for a, b in zip(first.batch(step, 8), again.batch(step, 8)))
    assert not torch.equal(first.batch(0, 8)[0], first.batch(1, 8)[0])


def test_workers_read_disjoint_slices_that_cover_the_dataset():
    shards = [data.SyntheticDataset(SYNTHETIC, IMAGES, shard=w, shards=3) for w in range(3)]
    seen = [set(shard.indices(step, 10).tolist()) for shard in shards for step in range(4)]
    per_worker = [set().union(*seen[w * 4:(w + 1) * 4]) for w in range(3)]
    assert all(not (per_worker[a] & per_worker[b]) for a in range(3) for b in range(a + 1, 3))
    assert set().union(*per_worker) == set(range(100))


def test_batches_cycle_through_the_workers_slice():
    shard = data.SyntheticDataset(SYNTHETIC, IMAGES, shard=1, shards=2)  # samples 50..99
    assert shard.indices(0, 4).tolist() == [50, 51, 52, 53]
    assert shard.indices(12, 4).tolist() == [98, 99, 50, 51]


def test_more_workers_than_samples_share_all_samples():
    tiny = SYNTHETIC.model_copy(update={"samples": 2})
    assert data.SyntheticDataset(tiny, IMAGES, shard=2, shards=3).indices(0, 3).tolist() == [0, 1, 0]


def test_memory_stays_bounded_for_huge_datasets(monkeypatch):
    monkeypatch.setattr(data, "MAX_POOL_BYTES", 10 * 3 * 8 * 8 * 4)
    dataset = data.SyntheticDataset(SYNTHETIC.model_copy(update={"samples": 1_000_000}), IMAGES)
    assert dataset.noise.shape[0] == 10
    inputs, labels = dataset.batch(123_456, 4)
    assert inputs.shape == (4, 3, 8, 8) and labels.shape == (4,)


def test_labels_are_learnable_a_linear_model_fits_them():
    dataset = data.SyntheticDataset(SYNTHETIC.model_copy(update={"samples": 256}), IMAGES)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for step in range(30):
        inputs, labels = dataset.batch(step, 32)
        loss = models.loss(model(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert sum(losses[-5:]) / 5 < 0.3 * sum(losses[:5]) / 5


def test_token_sequences_follow_a_low_entropy_chain():
    tokens, targets = data.SyntheticDataset(SYNTHETIC.model_copy(update={"numClasses": 50}),
                                            models.InputSpec(models.TOKENS, (6,), 50)).batch(0, 100)
    successors = {}
    for a, b in zip(tokens.reshape(-1).tolist(), targets.reshape(-1).tolist()):
        successors.setdefault(a, set()).add(b)
    # Every token is followed by at most two tokens: next-token loss can fall from ln(50) to ln(2).
    assert max(len(s) for s in successors.values()) <= data.MARKOV_SUCCESSORS

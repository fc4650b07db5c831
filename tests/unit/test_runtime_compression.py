"""The codecs of spec.compression against reference arithmetic: FP16 and BF16 round trips (scaled where FP16 needs
it), PowerSGD against PyTorch's own powerSGD_hook on the same gradients (a 1-rank gloo group), TopK's error
feedback carrying exactly what was not sent, and the 16-bit messages of parameter servers and peers."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook

from ringleader.api import variants
from ringleader.contract import lowrank
from ringleader.runtime import compression
from ringleader.runtime.exchange import wire


def one_rank(codec, flat: torch.Tensor) -> compression.Round:
    """Run a codec's rounds as one rank would (a sum or a gather over one rank is the payload itself); the last."""
    current = codec.encode(flat)
    rounds = 0
    while current is not None:
        rounds += 1
        assert rounds <= compression.FP16_RETRIES + 2
        if current.gather:
            current.gathered = [current.payload.clone()]
        last, current = current, codec.advance(current)
    codec.decode(flat)
    return last


def round_trip(codec, values: torch.Tensor) -> torch.Tensor:
    flat = values.clone()
    one_rank(codec, flat)
    return flat


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    return float(((got - want).abs() / want.abs()).max())


def test_fp16_round_trip_keeps_half_precision_once_the_scale_has_adapted():
    values = torch.tensor([3e-8, -2.5e-6, 1e-5, 4e-4])  # gradients below FP16's normal range (6.1e-5)
    codec = compression.CastCodec(torch.float16)
    first = round_trip(codec, values)
    assert relative_error(first, values) > 1e-2  # unscaled, the smallest lose most of their digits
    assert codec.scale > 1e4 and codec.scale == 2.0 ** round(np.log2(codec.scale))  # a power of two, from the sum
    assert relative_error(round_trip(codec, values), values) <= 2.0 ** -11  # half precision's rounding


def test_fp16_redoes_an_overflowing_sum_at_a_smaller_scale_alike_on_every_rank():
    codec = compression.CastCodec(torch.float16)
    values = torch.tensor([1e-3, 0.5])
    round_trip(codec, values)
    large = torch.tensor([3e5, -1.0])  # 3e5 * the scale the small gradient chose is far past FP16_MAX
    got = round_trip(codec, large)
    assert codec.retries >= 1 and torch.isfinite(got).all()
    assert relative_error(got, large) <= 2.0 ** -11


def test_bf16_round_trip_keeps_eight_bits_and_needs_no_scale():
    values = torch.randn(1000, generator=torch.Generator().manual_seed(0)) * 1e-6
    codec = compression.CastCodec(torch.bfloat16)
    assert relative_error(round_trip(codec, values), values) <= 2.0 ** -8
    assert codec.scale == 1.0


def test_a_round_counts_what_a_ring_sends_for_a_sum_and_for_a_gather():
    summed = compression.Round(torch.zeros(100, dtype=torch.float16))
    gathered = compression.Round(torch.zeros(100, dtype=torch.uint8), gather=True)
    assert summed.wire_bytes(4) == pytest.approx(2 * 3 / 4 * 200)
    assert gathered.wire_bytes(4) == 3 * 100


class Net(torch.nn.Module):
    """Matrices PowerSGD compresses (fc1, fc2) beside tensors it sends whole (biases, the small head)."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(20, 48)
        self.fc2 = torch.nn.Linear(48, 32)
        self.head = torch.nn.Linear(32, 3)

    def forward(self, x):  # (B, 20) -> (B, 3)
        return self.head(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


@pytest.fixture
def one_rank_group(tmp_path):
    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_power_sgd_matches_pytorchs_powersgd_hook_on_the_same_gradients(one_rank_group):
    rank, start, steps, seed = 2, 2, 6, 0
    torch.manual_seed(0)
    ddp = torch.nn.parallel.DistributedDataParallel(Net())
    state = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=rank,
                                        start_powerSGD_iter=start, min_compression_rate=lowrank.MIN_COMPRESSION_RATE,
                                        orthogonalization_epsilon=compression.ORTHOGONALIZATION_EPSILON,
                                        random_seed=seed)
    seen: list[tuple[torch.Tensor, torch.Tensor, list[torch.Size]]] = []  # (bucket in, bucket out, shapes)

    def recording_hook(hook_state, bucket):
        before, shapes = bucket.buffer().clone(), [g.shape for g in bucket.gradients()]
        return powerSGD_hook.powerSGD_hook(hook_state, bucket).then(
            lambda future: seen.append((before, future.value().clone(), shapes)) or future.value())

    ddp.register_comm_hook(state, recording_hook)
    for step in range(steps):
        generator = torch.Generator().manual_seed(step)
        ddp.zero_grad()
        loss = torch.nn.functional.cross_entropy(ddp(torch.randn(16, 20, generator=generator)),
                                                 torch.randint(0, 3, (16,), generator=generator))
        loss.backward()
    assert len(seen) == steps  # one bucket per iteration

    # The hook seeds its first projection with the first draw of numpy's RandomState(random_seed).
    codec = compression.PowerSgdCodec(seen[start][2], rank, error_feedback=True,
                                      seed=int(np.random.RandomState(seed).randint(1_000_000_000)), world=1)
    assert len(codec.matrices) == 2 and len(codec.whole) == 4  # fc1, fc2 as factors; biases and head whole
    for before, after, _ in seen[start:]:
        flat = before.clone()
        last = one_rank(codec, flat)
        assert not last.gather
        assert torch.allclose(flat, after, rtol=1e-4, atol=1e-6), float((flat - after).abs().max())
        assert not torch.allclose(flat, before, atol=1e-4)  # a rank-2 approximation, not the gradient
    assert torch.allclose(codec.error, state.error_dict[0], rtol=1e-4, atol=1e-6)


def test_power_sgd_sends_factors_of_the_matrices_and_the_rest_whole():
    shapes = [torch.Size([48, 20]), torch.Size([48]), torch.Size([3, 32])]
    codec = compression.PowerSgdCodec(shapes, rank=2, error_feedback=False, seed=1, world=1)
    flat = torch.randn(sum(s.numel() for s in shapes), generator=torch.Generator().manual_seed(2))
    first = codec.encode(flat.clone())
    second = codec.advance(first)
    # the 48x20 matrix as P (48x2) and Q (20x2); the bias and the 3x32 head (70 * 2 * 2 > 96) whole
    assert first.payload.numel() == 48 + 96 + 48 * 2 and second.payload.numel() == 20 * 2
    assert codec.advance(second) is None


def test_top_k_error_feedback_carries_exactly_what_was_not_sent():
    generator = torch.Generator().manual_seed(3)
    codec = compression.TopKCodec(numel=200, ratio=0.05, error_feedback=True)
    gradients = [torch.randn(200, generator=generator) for _ in range(5)]
    applied = torch.zeros(200)
    for gradient in gradients:
        flat = gradient.clone()
        last = one_rank(codec, flat)
        assert last.gather and last.payload.numel() == 10 * (4 + 4)  # 10 float32 values, 10 int32 indices
        assert int((flat != 0).sum()) == 10
        assert torch.equal((codec.error == 0) & (flat != 0), flat != 0)  # what was sent left the error
        applied += flat
    # Nothing is lost, only delayed: what was applied and what still waits add up to every gradient.
    assert torch.allclose(applied + codec.error, torch.stack(gradients).sum(0), atol=1e-5)


def test_top_k_without_error_feedback_forgets_what_it_left_out():
    codec = compression.TopKCodec(numel=100, ratio=0.1, error_feedback=False)
    values = torch.arange(100, dtype=torch.float32) - 49.5
    got = round_trip(codec, values)
    assert codec.error is None
    assert torch.equal(got.nonzero().flatten(), torch.tensor([0, 1, 2, 3, 4, 95, 96, 97, 98, 99]))
    assert torch.equal(got[got != 0], values[got != 0])


@pytest.mark.parametrize("method, bits", [("FP16", 11), ("BF16", 8)])
def test_messages_travel_in_16_bits_and_come_back_within_their_precision(method, bits):
    codec = compression.MessageCodec(variants.CompressionMethod(method))
    tensors = [torch.randn(30, 7, generator=torch.Generator().manual_seed(4)) * 1e-6, torch.ones(5), None]
    like = [torch.zeros(30, 7), torch.zeros(5), torch.zeros(2)]
    plain, cast = wire.Layout(like), wire.Layout(codec.travelling(like))
    assert cast.nbytes <= plain.nbytes // 2 + 4 * len(like) + wire.ALIGNMENT * (len(like) + 1)
    decoded = codec.unpack(cast, codec.pack(cast, tensors, cast.empty()).clone())
    assert relative_error(decoded[0], tensors[0]) <= 2.0 ** -bits and torch.equal(decoded[1], tensors[1])
    assert torch.equal(decoded[2], torch.zeros(2)) and all(t.dtype == torch.float32 for t in decoded)


def test_uncompressed_messages_are_the_layout_itself():
    codec = compression.MessageCodec(variants.CompressionMethod.NONE)
    like = [torch.randn(3, 4)]
    layout = wire.Layout(codec.travelling(like))
    assert layout.nbytes == wire.Layout(like).nbytes
    assert torch.equal(codec.unpack(layout, codec.pack(layout, like, layout.empty()))[0], like[0])


def test_methods_that_need_collectives_are_refused_for_messages():
    with pytest.raises(ValueError, match="PowerSGD"):
        compression.MessageCodec(variants.CompressionMethod.POWER_SGD)

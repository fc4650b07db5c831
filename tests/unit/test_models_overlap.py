"""models/overlap.py, the one simulator of buckets sent while backward runs, against hand-computed replays."""

from __future__ import annotations

import pytest

from ringleader.models import overlap
from ringleader.models import profile as profile_

MIB = 1024 * 1024


def gradient(name: str, size: float, ready: float) -> profile_.Gradient:
    return profile_.Gradient(name, float(size), float(ready))


# Three layers in parameter (forward) order; backward produces L3 at 1 ms, L2 at 3 ms, L1 at 7 ms, and ends at 7 ms.
LAYERS = profile_.Profile((gradient("L1", 1000, 0.007), gradient("L2", 3000, 0.003), gradient("L3", 2000, 0.001)),
                          backward_seconds=0.007)


def one_per_gradient() -> overlap.RuntimeBuckets:
    # Every bucket closes once it holds anything: the runtime's rule with a 1-byte bucket, one gradient each.
    return overlap.RuntimeBuckets(bucket_bytes=1, first_bucket_bytes=1)


def test_the_dag_models_first_in_first_out_recurrence_on_three_layers():
    # t_c(M) = 1 ms + M us: L3 3 ms, L2 4 ms, L1 2 ms. L3 starts when ready (1), ends 4; L2 at max(4, 3) = 4, ends 8;
    # L1 at max(8, 7) = 8, ends 10: 3 ms after backward's end are not hidden.
    replay = overlap.replay(LAYERS, one_per_gradient(), lambda size: 0.001 + size * 1e-6)
    assert [b.size_bytes for b in replay.buckets] == [2000, 3000, 1000]  # launch order: the last layer first
    assert replay.starts == pytest.approx((0.001, 0.004, 0.008))
    assert replay.ends == pytest.approx((0.004, 0.008, 0.010))
    assert replay.exposed_seconds == pytest.approx(0.003)


def test_a_long_backward_hides_everything_but_nothing_is_negative():
    replay = overlap.replay(profile_.Profile(LAYERS.gradients, 1.0), one_per_gradient(), lambda size: 0.001)
    assert replay.exposed_seconds == 0.0


def test_runtime_buckets_close_at_their_size_and_launch_in_order():
    # 4000-byte buckets in reverse parameter order: L3 (2000) is not full, L3+L2 (5000) is; L1 alone. The first
    # bucket's 1 MiB cap does not bite here.
    buckets = overlap.RuntimeBuckets(4000).buckets(LAYERS)
    assert [(b.size_bytes, b.ready_seconds, b.gradients) for b in buckets] == [(5000, 0.003, 2), (1000, 0.007, 1)]
    # The same buckets from the sizes a ring trial recorded, whatever bucket_bytes says.
    assert overlap.RuntimeBuckets(25 * MIB, recorded=(5000, 1000)).buckets(LAYERS) == buckets
    # A bucket complete before its predecessor waits for it: launched in order.
    early = profile_.Profile((gradient("a", 10, 0.0), gradient("b", 10, 0.005)), 0.005)
    assert [b.ready_seconds for b in one_per_gradient().buckets(early)] == [0.005, 0.005]


def test_the_first_runtime_bucket_closes_at_one_mebibyte():
    twelve = profile_.Profile(tuple(gradient(f"L{i}", 3 * MIB, 0.001 * (13 - i)) for i in range(1, 13)), 0.012)
    # Reverse order: L12 alone (3 MiB, already over 1 MiB), then 25 MiB or more (L11 to L3: 27 MiB), then L2 and L1.
    assert [b.gradients for b in overlap.RuntimeBuckets().buckets(twelve)] == [1, 9, 2]


def test_the_fusion_window_closes_a_bucket_after_its_cycle_time():
    ready = [0.0, 0.25, 0.75, 1.5, 2.25, 2.5]
    found = overlap.FusionWindow(window_seconds=1.0).buckets(
        profile_.Profile(tuple(gradient(f"g{i}", 1, t) for i, t in enumerate(ready)), 3.0))
    # {0, .25, .75} (1.5 is 1.5 after 0); {1.5, 2.25} (2.5 is exactly 1.0 after 1.5); {2.5}
    assert [(b.gradients, b.ready_seconds, b.size_bytes) for b in found] == [(3, 0.75, 3), (2, 2.25, 2), (1, 2.5, 1)]


def test_the_fusion_window_never_passes_its_threshold_but_a_big_gradient_goes_alone():
    sizes = [40 * MIB, 30 * MIB, 10 * MIB, 100 * MIB]
    found = overlap.FusionWindow().buckets(
        profile_.Profile(tuple(gradient(f"g{i}", s, 0.0) for i, s in enumerate(sizes)), 0.0))
    assert [(b.size_bytes / MIB, b.gradients) for b in found] == [(40, 1), (40, 2), (100, 1)]


def test_the_fusion_window_takes_gradients_in_ready_order_the_runtime_in_parameter_order():
    # Parameter order a, b; backward produces a last. Fusion: b then a; the runtime: reverse parameter order, b then a.
    profile = profile_.Profile((gradient("a", 1, 0.004), gradient("b", 2, 0.001)), 0.005)
    assert [b.size_bytes for b in overlap.FusionWindow(window_seconds=0.001).buckets(profile)] == [2, 1]
    assert [b.size_bytes for b in one_per_gradient().buckets(profile)] == [2, 1]
    # A model whose parameters are listed out of backward's order: the runtime still goes by parameter order.
    shuffled = profile_.Profile((gradient("a", 1, 0.001), gradient("b", 2, 0.004)), 0.005)
    assert [b.size_bytes for b in one_per_gradient().buckets(shuffled)] == [2, 1]
    assert [b.size_bytes for b in overlap.FusionWindow(window_seconds=0.001).buckets(shuffled)] == [1, 2]

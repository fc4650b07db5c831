"""A rank's emulated card (runtime/nic.py): full duplex, one transfer after another on each side, S bytes holding a
side for 8S/bandwidth, and pacing a sleep until the reservation ends. The ring's allreduce steps and the exchange's
messages are both reserved on it (their own tests: test_runtime_exchange.py, tests/integration)."""

import time

import pytest

from ringleader.runtime import nic

MEGABYTE_PER_SECOND = 8_000_000  # 1 MB holds a side for 1 s


def later() -> float:
    """A moment far enough ahead of now that no reservation made in a test is over before it asserts."""
    return time.perf_counter() + 1000.0


def test_a_side_carries_one_transfer_after_another_each_from_when_it_may_start():
    card, t = nic.Nic(MEGABYTE_PER_SECOND), later()
    assert card.seconds(1_000_000) == pytest.approx(1.0)
    assert card.send(1_000_000, t) == t
    assert card.send(500_000, t) == pytest.approx(t + 1.0)  # queued behind the first
    assert card.send(1_000, t + 5.0) == t + 5.0  # the side was free again by then


def test_sending_and_receiving_do_not_wait_for_each_other():
    card, t = nic.Nic(MEGABYTE_PER_SECOND), later()
    card.send(1_000_000, t)
    turn = card.receive(1_000_000, t)
    assert turn is not None and card.remaining(turn, t) == pytest.approx(1.0)  # not 2: full duplex


def test_received_messages_take_the_receiving_side_in_the_order_their_sending_turns_began():
    card, t = nic.Nic(MEGABYTE_PER_SECOND), later()
    seen_first = card.receive(1_000_000, t + 0.5)
    seen_second = card.receive(1_000_000, t)  # began earlier, seen later: goes first
    assert seen_first is not None and seen_second is not None
    assert card.remaining(seen_second, t) == pytest.approx(1.0)
    assert card.remaining(seen_first, t) == pytest.approx(2.0)


def test_an_allreduce_step_holds_both_sides_and_waits_for_both_to_be_free():
    card, t = nic.Nic(MEGABYTE_PER_SECOND), later()
    incoming = card.receive(1_000_000, t)
    assert card.exchange(1_000_000, t) == pytest.approx(t + 2.0)  # behind what is being received
    assert card.send(1_000, t) == pytest.approx(t + 2.0)  # and it held the sending side
    after = card.receive(1_000_000, t + 1.5)  # began while the step was on the receiving side: behind it
    assert incoming is not None and after is not None and card.remaining(after, t) == pytest.approx(3.0)


def test_a_ring_of_buckets_is_carried_first_in_first_out_from_each_launch():
    # What the ring's buckets get: each from its launch or when the previous one ends, whichever is later.
    card, t = nic.Nic(MEGABYTE_PER_SECOND), later()
    ends = [card.exchange(100_000, t + launched) for launched in (0.0, 0.05, 0.5)]
    assert ends == pytest.approx([t + 0.1, t + 0.2, t + 0.6])


def test_pacing_sleeps_until_the_reservation_ends_and_not_past_a_reservation_already_over():
    card = nic.Nic(MEGABYTE_PER_SECOND)
    end = card.exchange(50_000, time.perf_counter())  # 50 ms
    assert card.pace(end) > 0 and time.perf_counter() >= end
    assert card.pace(time.perf_counter() - 1.0) == 0.0


def test_a_card_without_a_cap_is_free_and_never_waits():
    card = nic.Nic(None)
    now = time.perf_counter()
    assert not card.active and card.seconds(10**9) == 0.0
    assert card.send(10**9, now) == now and card.exchange(10**9, now) == now
    assert card.receive(10**9, now) is None
    assert card.pace(now + 1000.0) == 0.0
    with pytest.raises(ValueError, match="must be positive"):
        nic.Nic(0)

"""A pod's emulated card (runtime/nic.py): full duplex, one transfer after another on each side, S bytes holding a
side for 8S/bandwidth, and pacing a sleep until the reservation ends; a pod of several ranks shares one, across its
processes. The ring's allreduce steps and the exchange's messages are both reserved on it (their own tests:
test_runtime_exchange.py, tests/integration)."""

import os
import pathlib
import subprocess
import sys
import time

import pytest

from ringleader.api import spec as spec_
from ringleader.api import trial as trial_
from ringleader.contract import levels
from ringleader.runtime import nic

SOURCE = pathlib.Path(__file__).resolve().parents[2] / "operator"

MEGABYTE_PER_SECOND = 8_000_000  # 1 MB holds a side for 1 s


def later() -> float:
    """A moment far enough ahead of now that no reservation made in a test is over before it asserts."""
    return time.perf_counter() + 1000.0


def test_a_side_carries_one_transfer_after_another_each_from_when_it_may_start():
    card, t = nic.EmulatedNic(MEGABYTE_PER_SECOND), later()
    assert card.seconds(1_000_000) == pytest.approx(1.0)
    assert card.send(1_000_000, t) == t
    assert card.send(500_000, t) == pytest.approx(t + 1.0)  # queued behind the first
    assert card.send(1_000, t + 5.0) == t + 5.0  # the side was free again by then


def test_sending_and_receiving_do_not_wait_for_each_other():
    card, t = nic.EmulatedNic(MEGABYTE_PER_SECOND), later()
    card.send(1_000_000, t)
    turn = card.receive(1_000_000, t)
    assert turn is not None and card.remaining(turn, t) == pytest.approx(1.0)  # not 2: full duplex


def test_received_messages_take_the_receiving_side_in_the_order_their_sending_turns_began():
    card, t = nic.EmulatedNic(MEGABYTE_PER_SECOND), later()
    seen_first = card.receive(1_000_000, t + 0.5)
    seen_second = card.receive(1_000_000, t)  # began earlier, seen later: goes first
    assert seen_first is not None and seen_second is not None
    assert card.remaining(seen_second, t) == pytest.approx(1.0)
    assert card.remaining(seen_first, t) == pytest.approx(2.0)


def test_an_allreduce_step_holds_both_sides_and_waits_for_both_to_be_free():
    card, t = nic.EmulatedNic(MEGABYTE_PER_SECOND), later()
    incoming = card.receive(1_000_000, t)
    assert card.exchange(1_000_000, t) == pytest.approx(t + 2.0)  # behind what is being received
    assert card.send(1_000, t) == pytest.approx(t + 2.0)  # and it held the sending side
    after = card.receive(1_000_000, t + 1.5)  # began while the step was on the receiving side: behind it
    assert incoming is not None and after is not None and card.remaining(after, t) == pytest.approx(3.0)


def test_a_ring_of_buckets_is_carried_first_in_first_out_from_each_launch():
    # What the ring's buckets get: each from its launch or when the previous one ends, whichever is later.
    card, t = nic.EmulatedNic(MEGABYTE_PER_SECOND), later()
    ends = [card.exchange(100_000, t + launched) for launched in (0.0, 0.05, 0.5)]
    assert ends == pytest.approx([t + 0.1, t + 0.2, t + 0.6])


def test_pacing_sleeps_until_the_reservation_ends_and_not_past_a_reservation_already_over():
    card = nic.EmulatedNic(MEGABYTE_PER_SECOND)
    end = card.exchange(50_000, time.perf_counter())  # 50 ms
    assert card.pace(end) > 0 and time.perf_counter() >= end
    assert card.pace(time.perf_counter() - 1.0) == 0.0


def test_a_card_without_a_cap_is_free_and_never_waits():
    card = nic.EmulatedNic(None)
    now = time.perf_counter()
    assert not card.active and card.seconds(10**9) == 0.0
    assert card.send(10**9, now) == now and card.exchange(10**9, now) == now
    assert card.receive(10**9, now) is None
    assert card.pace(now + 1000.0) == 0.0
    with pytest.raises(ValueError, match="must be positive"):
        nic.EmulatedNic(0)


def test_a_pods_ranks_share_one_card_through_its_file_across_processes(tmp_path):
    shared, t = tmp_path / "card", later()
    other = subprocess.run(
        [sys.executable, "-c", "import sys; from ringleader.runtime import nic; "
         "card = nic.EmulatedNic(8_000_000, sys.argv[1]); print(card.send(1_000_000, float(sys.argv[2])))", str(shared),
         repr(t)],
        capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(SOURCE)})
    assert float(other.stdout) == t  # the other rank's message took the sending side first
    card = nic.EmulatedNic(MEGABYTE_PER_SECOND, shared)
    assert card.send(500_000, t) == pytest.approx(t + 1.0)  # this one queues behind it, on the pod's one card
    card.close()
    assert not shared.exists()


def test_a_step_the_pods_ranks_take_together_is_reserved_once_by_the_first_to_ask(tmp_path):
    first, second, t = (nic.EmulatedNic(MEGABYTE_PER_SECOND, tmp_path / "card"),
                        nic.EmulatedNic(MEGABYTE_PER_SECOND, tmp_path / "card"), later())
    assert first.exchange(1_000_000, t, key=1) == pytest.approx(t + 1.0)
    assert second.exchange(1_000_000, t + 0.5, key=1) == pytest.approx(t + 1.0)  # the same step: its end, not another
    assert second.exchange(1_000_000, t, key=2) == pytest.approx(t + 2.0)  # the next step, behind it
    turn = first.receive(1_000_000, t)
    # The other rank's card sees the turn: behind the first step, ahead of the second, which began later.
    assert turn is not None and second.remaining(turn, t) == pytest.approx(2.0)
    for card in (first, second):
        card.close()


def test_a_rank_alone_in_its_pod_keeps_its_card_in_memory():
    trial = trial_.Trial(experiment="e", name="e-0", index=0, spec=spec_.ExperimentSpec.model_validate(
        {"architecture": "RingAllReduce", "workers": {"replicas": 4, "ranksPerPod": 2},
         "network": {"bandwidth": "8Mbit"}}))
    alone = trial_.Trial(experiment="e", name="e-0", index=0, spec=spec_.ExperimentSpec.model_validate(
        {"workers": {"replicas": 4}, "network": {"bandwidth": "8Mbit"}}))
    assert nic.pod_card(alone, 0, levels.Levels.of(alone))._shared is None
    shared = nic.pod_card(trial, 1, levels.Levels.of(trial, start="s1"))
    assert shared._shared is not None and shared._shared.name == "ringleader-card-e-0-s1-pod0"
    shared.close()

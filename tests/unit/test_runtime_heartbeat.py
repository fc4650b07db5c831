"""The stall watchdog's verdicts: who stopped a trial, from what every rank's beat and progress counters read over
time."""

from __future__ import annotations

from ringleader.runtime import heartbeat

NAMES = {0: "worker-0", 1: "worker-1", 2: "worker-2"}


def watch(rank: int = 0, world_size: int = 2) -> heartbeat.Watchdog:
    return heartbeat.Watchdog(rank, world_size, NAMES, stall_seconds=60)


def test_a_trial_that_progresses_is_left_alone():
    dog = watch()
    for second in range(0, 200, 5):
        dog.observe(second, beats={0: second, 1: second}, progress={0: second, 1: second})
        assert dog.verdict(second) is None


def test_a_stopped_rank_is_named_by_its_waiting_peer_once_the_stall_timeout_passed():
    dog = watch()
    dog.observe(0, beats={0: 1, 1: 1}, progress={0: 10, 1: 10})  # rank 1's last iteration; a last beat follows
    dog.observe(1, beats={0: 2, 1: 2}, progress={0: 10, 1: 10})
    for second in range(2, 60):  # rank 1 stopped (SIGSTOP): no beat, no progress; rank 0 waits for it, beating
        dog.observe(second, beats={0: 1 + second, 1: 2}, progress={0: 10, 1: 10})
        assert dog.verdict(second) is None
    dog.observe(60, beats={0: 61, 1: 2}, progress={0: 10, 1: 10})

    assert dog.verdict(60) == (1, "rank 1 (worker-1) made no progress for 60 s (and no heartbeat: stopped, "
                                  "frozen or dead)")


def test_a_rank_stuck_while_its_peers_go_on_is_named_even_though_it_beats_but_only_after_five_timeouts():
    dog = watch(rank=0, world_size=3)
    dog.observe(0, beats={0: 0, 1: 0, 2: 0}, progress={0: 5, 1: 5, 2: 5})
    dog.observe(61, beats={0: 9, 1: 9, 2: 9}, progress={0: 80, 1: 5, 2: 90})  # ASP: the others go on
    assert dog.verdict(61) is None  # alive: a long iteration (a big model on a slow CPU) is not a stall
    dog.observe(300, beats={0: 40, 1: 40, 2: 40}, progress={0: 400, 1: 5, 2: 450})

    culprit, reason = dog.verdict(300)
    assert culprit == 1 and reason == ("rank 1 (worker-1) made no progress for 300 s "
                                       "(its heartbeat goes on: stuck inside an iteration?)")


def test_the_rank_behind_is_named_and_a_tie_with_everyone_alive_names_no_one():
    dog = watch(rank=0, world_size=3)
    dog.observe(0, beats={0: 0, 1: 0, 2: 0}, progress={0: 7, 1: 6, 2: 7})
    dog.observe(60, beats={0: 9, 1: 9, 2: 9}, progress={0: 7, 1: 6, 2: 7})
    assert dog.verdict(60) is None
    dog.observe(300, beats={0: 40, 1: 40, 2: 40}, progress={0: 7, 1: 6, 2: 7})
    assert dog.verdict(300)[0] == 1

    tie = watch(rank=0, world_size=2)
    tie.observe(0, beats={0: 0, 1: 0}, progress={0: 7, 1: 7})
    tie.observe(300, beats={0: 40, 1: 40}, progress={0: 7, 1: 7})
    assert tie.verdict(300) == (None, "no rank made progress for 300 s (ranks 0, 1 at iteration 7), though every "
                                      "one is alive: a hang inside a collective or native code")


def test_a_rank_done_training_is_never_stalled_while_it_waits_for_the_others():
    dog = watch()
    dog.observe(0, beats={0: 0, 1: 0}, progress={0: 3, 1: 20 + heartbeat.DONE})
    for second in range(1, 200):
        dog.observe(second, beats={0: second, 1: second}, progress={0: 3 + second, 1: 20 + heartbeat.DONE})
    assert dog.verdict(199) is None


def test_a_store_that_stops_answering_names_its_host_rank_0_after_the_stall_timeout():
    dog = watch(rank=1)
    dog.observe(0, beats={0: 1, 1: 1}, progress={0: 1, 1: 1})  # then reads block: rank 0, the host, is stopped
    assert dog.verdict(59) is None
    culprit, reason = dog.verdict(61)
    assert culprit == 0 and "the rendezvous store it hosts did not answer" in reason
    dog.observe(62, beats={0: 2, 1: 2}, progress={0: 2, 1: 2})  # it answers again: all is well
    assert dog.verdict(62) is None


def test_progress_unseen_while_the_store_did_not_answer_is_not_called_a_stall():
    dog = watch(rank=1, world_size=2)
    dog.observe(0, beats={0: 1, 1: 1}, progress={0: 0, 1: 0})  # still starting up
    dog.observe(30, beats={0: 9, 1: 9}, progress={0: 0, 1: 0})  # then the store stops answering (rank 0 stopped)

    assert dog.verdict(65) is None  # 65 s without progress seen, but only 30 s of them in answered reads
    assert dog.verdict(90)[0] == 0  # 60 s without an answer: the store's host is named

"""Which rank a failed trial blames, the same way in the launcher and the operator, and the failure line both parse."""

from ringleader.contract import failures, outcomes

Exit = failures.Exit


def test_the_failure_line_is_one_line_and_parses_back():
    line = failures.failure_line(1, "worker", "RuntimeError: boom\n  more")
    assert line == "ringleader: rank 1 (worker) failed: RuntimeError: boom more"
    assert failures.reason_of(["noise", line]) == "RuntimeError: boom more"
    assert failures.reason_of([failures.failure_line(None, "", "no contract")]) == "no contract"
    assert failures.reason_of(["Traceback ...", "ringleader: something else"]) is None


def test_a_rank_that_lost_a_peer_names_it_when_it_knows():
    named = failures.lost_contact(1, "Connection reset by peer")
    assert named == "lost contact with rank 1 (it died, hung or is unreachable): Connection reset by peer"
    assert failures.is_echo(named) and failures.lost_rank(named) == 1
    unknown = failures.lost_contact(None, "Timed out")
    assert unknown.startswith("lost contact with a peer rank") and failures.is_echo(unknown)
    assert failures.lost_rank(unknown) is None
    assert not failures.is_echo("RuntimeError: boom") and not failures.is_echo(None)


def test_a_signal_beats_an_earlier_echo():
    # The e2e failure this rule exists for: worker-0 exits 1 having lost worker-1, and its status
    # arrives before that of worker-1, SIGKILLed a moment earlier.
    echo = Exit(rank=0, reason=failures.lost_contact(None, "Read error"), order=10)
    killed = Exit(rank=1, external=True, order=11)
    assert failures.blame([echo, killed]) == killed


def test_a_ranks_own_error_beats_an_echo_and_a_signal_beats_an_error():
    error = Exit(rank=2, reason="RuntimeError: boom", order=5)
    echo = Exit(rank=0, reason=failures.lost_contact(2, "reset"), order=4)
    assert failures.blame([echo, error]) == error
    oom = Exit(rank=3, external=True, order=6)
    assert failures.blame([echo, error, oom]) == oom


def test_among_causes_the_earliest_then_the_lowest_rank():
    assert failures.blame([Exit(rank=2, external=True, order=3), Exit(rank=1, external=True, order=4)]).rank == 2
    assert failures.blame([Exit(rank=2, external=True, order=3), Exit(rank=1, external=True, order=3)]).rank == 1


def test_among_echoes_only_the_rank_they_name_is_blamed_even_before_its_own_end_is_seen():
    echoes = [Exit(rank=0, reason=failures.lost_contact(1, "x"), order=1),
              Exit(rank=2, reason=failures.lost_contact(1, "x"), order=2),
              Exit(rank=3, reason=failures.lost_contact(2, "x"), order=3)]
    assert failures.blame(echoes) == 1  # not visible yet: only its number
    silent_one_ended_too = echoes + [Exit(rank=1, reason=failures.lost_contact(0, "x"), order=4)]
    assert failures.blame(silent_one_ended_too).rank == 1
    anonymous = [Exit(rank=2, reason=failures.lost_contact(None, "x"), order=2),
                 Exit(rank=1, reason=failures.lost_contact(None, "x"), order=2)]
    assert failures.blame(anonymous).rank == 1
    assert failures.blame([]) is None


def test_a_rank_stopped_by_the_launcher_is_never_the_cause():
    stopped = Exit(rank=0, external=True, stopped=True, order=1)
    echo = Exit(rank=1, reason=failures.lost_contact(None, "x"), order=2)
    assert failures.blame([stopped, echo]) == echo


def test_blame_waits_for_a_cause_until_the_grace_is_over_or_nothing_runs():
    echo = [Exit(rank=0, reason=failures.lost_contact(None, "x"))]
    assert not failures.settled(echo, running=1, waited_seconds=1, grace_seconds=10)
    assert failures.settled(echo, running=1, waited_seconds=10, grace_seconds=10)
    assert failures.settled(echo, running=0, waited_seconds=0, grace_seconds=10)
    assert failures.settled(echo + [Exit(rank=1, external=True)], running=1, waited_seconds=0, grace_seconds=10)
    assert not failures.settled([], running=0, waited_seconds=99, grace_seconds=10)


def test_a_long_message_is_cut_in_the_middle_keeping_what_failed_and_what_to_do():
    text = "model 'm:f': importing m failed: " + "x" * 2000 + "; install it in the image or put it on PYTHONPATH"
    short = failures.shorten_middle(text, 200)
    assert len(short) == 200 and "…" in short
    assert short.startswith("model 'm:f': importing m failed: ") and short.endswith("or put it on PYTHONPATH")
    assert failures.shorten_middle("one\n  line", 200) == "one line"
    assert len(failures.shorten_middle(text)) == failures.MESSAGE_CHARACTERS


def test_a_failure_no_restart_can_fix_says_so_and_parses_back():
    line = failures.failure_line(1, "worker", "ModelError: model 'm:f': importing m failed", permanent=True)
    assert line == "ringleader: rank 1 (worker) failed (permanent): ModelError: model 'm:f': importing m failed"
    assert failures.reason_of([line]) == "ModelError: model 'm:f': importing m failed"
    assert failures.is_permanent(["noise", line])
    assert failures.is_permanent([failures.failure_line(None, "", "RANK is not set", permanent=True)])
    # The last failure line counts: a later one that is not permanent is what the rank ended with.
    assert not failures.is_permanent([line, failures.failure_line(1, "worker", "RuntimeError: boom")])
    assert not failures.is_permanent(["ringleader: ended, 20 records"])


def _verdict(exits, early=None):
    return failures.verdict(exits, early=early, who=lambda rank: f"rank {rank}",
                            describe=lambda rank: f"rank {rank} exited with code 1")


def test_the_verdict_says_one_word_for_each_end_both_backends_meet():
    lost = failures.lost_contact(1, "connection reset")
    crashed = _verdict([failures.Exit(0, reason="RuntimeError: boom"), failures.Exit(1, reason=lost, order=1.0)])
    assert (crashed.reason, crashed.rank, crashed.message) == (outcomes.RANK_FAILED, 0, "rank 0 exited with code 1")
    permanent = _verdict([failures.Exit(2, reason="ModelError: no such model", permanent=True)])
    assert (permanent.reason, permanent.rank) == (outcomes.PERMANENT_FAILURE, 2)


def test_a_rank_named_only_by_its_peers_stopped_responding_in_the_witness_words():
    silent = _verdict([failures.Exit(0, reason=failures.lost_contact(1, "timed out"))])
    assert (silent.reason, silent.rank) == (outcomes.RANK_FAILED, 1)
    assert silent.message == failures.stopped_responding("rank 1", "rank 0 exited with code 1")
    assert silent.message == "rank 1 stopped responding: rank 0 exited with code 1"


def test_a_rank_that_exited_early_outranks_the_peers_that_lost_it_but_not_a_cause():
    echo = [failures.Exit(0, reason=failures.lost_contact(None, "reset"))]
    nothing = _verdict(echo, failures.Early(1, "rank 1 (worker-1)", recorded_nothing=True))
    assert (nothing.reason, nothing.rank) == (outcomes.EXITED_EARLY, 1)
    assert nothing.message == "rank 1 (worker-1) exited with code 0 but recorded no iteration"
    midway = _verdict(echo, failures.Early(1, "pod q-0-worker-1", recorded_nothing=False))
    assert midway.message.endswith("(os._exit in user code?); rank 0 exited with code 1")
    cause = _verdict([failures.Exit(0, reason="RuntimeError: boom")], failures.Early(1, "x", recorded_nothing=True))
    assert cause.reason == outcomes.RANK_FAILED


def test_a_sweep_fails_with_the_word_its_failed_trials_share_else_trials_failed():
    assert outcomes.sweep_reason([outcomes.RANK_FAILED, outcomes.RANK_FAILED]) == outcomes.RANK_FAILED
    assert outcomes.sweep_reason([outcomes.RANK_FAILED, outcomes.DEADLINE_EXCEEDED]) == outcomes.TRIALS_FAILED
    assert outcomes.sweep_reason([None]) == outcomes.sweep_reason([]) == outcomes.TRIALS_FAILED

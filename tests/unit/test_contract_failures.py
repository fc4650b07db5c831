"""Which rank a failed trial blames, the same way in the launcher and the operator, and the failure line both parse."""

from ringleader.contract import failures

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
    short = failures.shorten(text, 200)
    assert len(short) == 200 and "…" in short
    assert short.startswith("model 'm:f': importing m failed: ") and short.endswith("or put it on PYTHONPATH")
    assert failures.shorten("one\n  line", 200) == "one line"
    assert len(failures.shorten(text)) == failures.MESSAGE_CHARACTERS


def test_a_failure_no_restart_can_fix_says_so_and_parses_back():
    line = failures.failure_line(1, "worker", "ModelError: model 'm:f': importing m failed", permanent=True)
    assert line == "ringleader: rank 1 (worker) failed (permanent): ModelError: model 'm:f': importing m failed"
    assert failures.reason_of([line]) == "ModelError: model 'm:f': importing m failed"
    assert failures.is_permanent(["noise", line])
    assert failures.is_permanent([failures.failure_line(None, "", "RANK is not set", permanent=True)])
    # The last failure line counts: a later one that is not permanent is what the rank ended with.
    assert not failures.is_permanent([line, failures.failure_line(1, "worker", "RuntimeError: boom")])
    assert not failures.is_permanent(["ringleader: ended, 20 records"])

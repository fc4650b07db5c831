"""How a pod's agent speaks for its ranks once they ended: which rank it names, its exit status and its message."""

import pathlib
import signal
import types

from ringleader.api import spec as spec_
from ringleader.api import trial as trial_
from ringleader.contract import failures
from ringleader.runtime import agent

PAIR = trial_.Trial(experiment="e", name="e-0", index=0, spec=spec_.ExperimentSpec.model_validate(
    {"architecture": "RingAllReduce", "workers": {"replicas": 4, "ranksPerPod": 2}})).pod_of(2)  # ranks 2 and 3


def ended(tmp_path: pathlib.Path, returncodes, messages=("", ""), stopped=(False, False),
          requested=False) -> agent.Agent:
    """The agent of pod worker-1 once its ranks ended with `returncodes` (negative: by that signal)."""
    pod = agent.Agent(env=None, ranks=PAIR, environ={}, message_dir=tmp_path)
    for order, (slot, code, message, was_stopped) in enumerate(zip(PAIR, returncodes, messages, stopped)):
        path = tmp_path / f"rank-{slot.rank}"
        path.write_text(message)
        pod.processes.append(agent.PodRank(slot, types.SimpleNamespace(returncode=code), path, was_stopped,
                                               float(order)))
    pod.stop_requested_at = 1.0 if requested else None
    return pod


ECHO = "ringleader: rank 2 (worker) failed: lost contact with rank 3 (it died, hung or is unreachable): Read error"


def test_a_killed_rank_is_named_before_its_peer_that_only_lost_contact_whatever_ended_first(tmp_path):
    status, message = ended(tmp_path, (1, -signal.SIGKILL), (ECHO, "")).outcome()
    assert status == 128 + signal.SIGKILL  # as the operator weighs a pod whose one rank was SIGKILLed
    assert message.startswith("ringleader: rank 3 (worker-1 local rank 1, killed by SIGKILL) failed: no reason of its "
                              "own: killed by SIGKILL from outside the runtime")
    assert failures.rank_of([message]) == 3 and not failures.is_echo(failures.reason_of([message]))


def test_a_ranks_own_reason_and_its_permanence_reach_the_pods_message(tmp_path):
    own = failures.failure_line(2, "worker", "ModelError: model 'x:y': no module x", permanent=True)
    status, message = ended(tmp_path, (1, -signal.SIGTERM), (own, ""), stopped=(False, True)).outcome()
    assert status == 1
    assert message == ("ringleader: rank 2 (worker-1 local rank 0, exit code 1) failed (permanent): ModelError: model "
                       "'x:y': no module x")
    assert failures.is_permanent([message])


def test_ranks_that_all_finished_leave_the_first_ranks_message_and_one_without_leaves_none(tmp_path):
    assert ended(tmp_path, (0, 0), ('{"throughput": 3.5}', "ringleader: ended, 20 records")).outcome() == (
        0, '{"throughput": 3.5}')
    (tmp_path / "silent").mkdir()
    assert ended(tmp_path / "silent", (0, 0), ('{"throughput": 3.5}', "")).outcome() == (0, None)  # an os._exit(0)


def test_a_pod_stopped_from_outside_exits_as_sigterm_would_and_blames_no_rank(tmp_path):
    assert ended(tmp_path, (-signal.SIGTERM, 143), stopped=(True, True), requested=True).outcome() == (143, None)

"""Progress: the slowest worker's last `progress: iteration K/N` line, read from the tail of each worker's log."""

import asyncio

from ringleader.api import constants
from ringleader.api import status as status_
from ringleader.contract import progress as progress_line
from ringleader.controller import progress, reconciler, recording
from ringleader.controller import settings as settings_


def test_the_operator_reads_back_the_last_progress_line_a_worker_printed():
    log = "\n".join(["starting", progress_line.progress_line(3, 100, 0.5, 0.004), "loss 0.4",
                     progress_line.progress_line(17, 100, 0.25, 0.0035), "a stray line about iteration 99/100"])
    assert progress_line.last_iteration(log) == 17
    assert progress_line.last_iteration("warming up\n") is None


def test_the_slowest_worker_defines_the_progress_and_a_silent_one_counts_as_zero():
    assert progress.slowest([40, 37, 52]) == 37
    assert progress.slowest([40, None]) == 0


def worker(name, rank, phase="Running"):
    return {"metadata": {"name": name, "labels": {constants.LABEL_ROLE: "worker", constants.LABEL_RANK: str(rank)}},
            "spec": {"containers": [{"name": "trainer"}]}, "status": {"phase": phase}}


class FakeKube:
    """Answers pods/log reads from a dict; counts them."""

    def __init__(self, logs):
        self.logs, self.reads = logs, []

    async def read_log(self, namespace, name, container, *, tail_lines, limit_bytes):
        self.reads.append((namespace, name, container))
        return self.logs.get(name)


def read(controller, status, pods):
    return asyncio.run(controller._read_progress(("ns", "q"), status, {"q-0": pods}))


def controller_with(logs, poll_seconds=60.0):
    settings = settings_.Settings(timing=settings_.TimingSettings(progress_poll_seconds=poll_seconds))
    return reconciler.Controller(settings, FakeKube(logs), recording.Recorder(settings.tracking))


RUNNING = status_.ExperimentStatus(trials=[status_.TrialStatus(name="q-0", index=0, phase=status_.Phase.RUNNING)])


def test_running_trials_are_polled_once_per_interval_from_their_workers_logs():
    controller = controller_with({"q-0-worker-0": "progress: iteration 12/50\n", "q-0-worker-1": "progress: iteration 9/50\n"})
    pods = [worker("q-0-worker-0", 1), worker("q-0-worker-1", 2)]
    assert read(controller, RUNNING, pods) == {"q-0": 9}
    assert read(controller, RUNNING, pods) == {"q-0": 9}  # within the interval: no new reads
    assert [name for _, name, _ in controller.kube.reads] == ["q-0-worker-0", "q-0-worker-1"]
    assert controller.kube.reads[0][2] == "trainer"


def test_an_unreadable_log_keeps_the_last_known_progress():
    controller = controller_with({"q-0-worker-0": "progress: iteration 12/50\n", "q-0-worker-1": "progress: iteration 9/50\n"},
                                 poll_seconds=0.001)
    pods = [worker("q-0-worker-0", 1), worker("q-0-worker-1", 2)]
    assert read(controller, RUNNING, pods) == {"q-0": 9}
    del controller.kube.logs["q-0-worker-1"]  # the kubelet is away
    assert read(controller, RUNNING, pods) == {"q-0": 9}


def test_nothing_is_read_when_no_trial_runs():
    controller = controller_with({})
    assert read(controller, status_.ExperimentStatus(), [worker("q-0-worker-0", 1)]) == {}
    assert controller.kube.reads == []

"""Progress: one worker's last `progress: iteration K/N` line per running trial, read once per interval, backing off
(and saying so in an Event) while its log cannot be read."""

import asyncio
import datetime

import kopf
from kopf._core.engines import posting

from ringleader.api import constants
from ringleader.api import status as status_
from ringleader.contract import progress as progress_line
from ringleader.controller import kube, polling, progress_logs, reconciler, recording
from ringleader.controller import settings as settings_


def test_the_operator_reads_back_the_progress_lines_a_worker_printed():
    log = "\n".join(["starting", progress_line.progress_line(3, 100, 0.5, 0.004), "loss 0.4",
                     progress_line.progress_line(17, 100, 0.25, 0.0035), "a stray line about iteration 99/100"])
    assert progress_logs.lines(log) == (progress_line.Line(3, 100, 0.004), progress_line.Line(17, 100, 0.0035))
    assert progress_logs.lines("warming up\n") == ()


def test_the_kubelets_timestamps_date_each_line():
    # As `kubectl logs --timestamps` shows them: RFC 3339 with nanoseconds, then the line.
    log = ("2030-01-01T00:00:00.123456789Z starting\n"
           "2030-01-01T00:00:10.500000000Z " + progress_line.progress_line(20, 200, 0.5, 0.49) + "\n"
           "2030-01-01T00:00:20.5+00:00 " + progress_line.progress_line(40, 200, 0.4, 0.51) + "\n")
    first, second = progress_logs.lines(log)
    assert (first.iteration, first.iterations, first.iteration_seconds) == (20, 200, 0.49)
    assert first.at == datetime.datetime(2030, 1, 1, 0, 0, 10, 500000, tzinfo=datetime.timezone.utc)
    assert (second.at - first.at).total_seconds() == 10.0
    # Read without timestamps, a line is what the user's code printed: no date in it is trusted to be one.
    assert progress_logs.lines("2030-13-45T00:00:00Z progress: iteration 3/9\n") == (progress_line.Line(3, 9, None),)


def worker(name, rank, phase="Running", role="worker"):
    return {"metadata": {"name": name, "labels": {constants.LABEL_ROLE: role, constants.LABEL_RANK: str(rank)}},
            "spec": {"containers": [{"name": "trainer"}]}, "status": {"phase": phase}}


def test_the_lowest_ranked_worker_reports_once_it_runs():
    pods = [worker("q-0-worker-2", 2), worker("q-0-ps-0", 0, role="ps"), worker("q-0-worker-1", 1)]
    assert progress_logs.reporter(pods)["metadata"]["name"] == "q-0-worker-1"
    assert progress_logs.reporter([worker("q-0-worker-1", 1, phase="Pending"), worker("q-0-worker-2", 2)]) is None
    # A rank that ended has no more to say; one still running may be waiting for MLflow to take its records.
    pods[2] = worker("q-0-worker-1", 1, phase="Succeeded")
    assert progress_logs.reporter(pods)["metadata"]["name"] == "q-0-worker-2"
    pods[0] = worker("q-0-worker-2", 2, phase="Succeeded")
    assert progress_logs.reporter(pods)["metadata"]["name"] == "q-0-ps-0"
    pods[1] = worker("q-0-ps-0", 0, phase="Succeeded", role="ps")
    assert progress_logs.reporter(pods)["metadata"]["name"] == "q-0-worker-1"
    assert progress_logs.container(pods[0]) == "trainer"


def test_a_worker_whose_node_stopped_answering_is_not_asked_for_its_log():
    # As the node controller leaves it: Ready=False while its container still says ready and running.
    lost = worker("q-0-worker-0", 0)
    lost["spec"]["nodeName"] = "n2"
    lost["status"].update(conditions=[{"type": "Ready", "status": "False"}],
                          containerStatuses=[{"name": "trainer", "ready": True, "state": {"running": {}}}])
    assert progress_logs.reporter([lost, worker("q-0-worker-1", 1)])["metadata"]["name"] == "q-0-worker-1"
    assert progress_logs.reporter([lost]) is None


class FakeKube:
    """Answers pods/log reads from a dict (a missing log is unavailable, as without a node); counts them."""

    def __init__(self, logs):
        self.logs, self.reads = logs, []

    async def read_log(self, namespace, name, container, *, tail_lines, limit_bytes):
        self.reads.append((namespace, name, container))
        if name not in self.logs:
            raise kube.LogUnavailable("HTTP 204: no node serves the pod's log")
        return self.logs[name]


BODY = {"apiVersion": constants.API_VERSION, "kind": constants.KIND,
        "metadata": {"namespace": "ns", "name": "q", "uid": "u-1"}}


def read(controller, status, pods):
    """One progress read as a reconcile makes it, with kopf's event queue in place; (the last iteration read of
    each trial, events posted)."""
    async def run():
        queue = asyncio.Queue()
        posting.settings_var.set(kopf.OperatorSettings())
        posting.event_queue_var.set(queue)
        posting.event_queue_loop_var.set(asyncio.get_running_loop())
        found = await progress_logs.read(controller.kube, controller.polls, dict(BODY), status,
                                    {"q-0": progress_logs.reporter(pods)})
        found = {name: lines[-1].iteration for name, lines in found.items()}
        return found, [(e.type, e.reason, e.message) for e in [queue.get_nowait() for _ in range(queue.qsize())]]
    return asyncio.run(run())


def controller_with(logs, poll_seconds=60.0, max_backoff=600.0):
    settings = settings_.Settings(timing=settings_.TimingSettings(progress_poll_seconds=poll_seconds,
                                                                 max_progress_backoff_seconds=max_backoff))
    return reconciler.Controller(settings, FakeKube(logs), recording.MlflowCalls(settings.tracking))


RUNNING = status_.ExperimentStatus(trials=[status_.TrialStatus(name="q-0", index=0, phase=status_.Phase.RUNNING)])
EIGHT = [worker(f"q-0-worker-{r}", r) for r in range(8)]


def test_a_running_trial_costs_one_log_read_per_interval_whatever_its_workers():
    controller = controller_with({"q-0-worker-0": "progress: iteration 12/50\n"})
    assert read(controller, RUNNING, EIGHT) == ({"q-0": 12}, [])
    assert read(controller, RUNNING, EIGHT) == ({"q-0": 12}, [])  # within the interval: no new read
    assert controller.kube.reads == [("ns", "q-0-worker-0", "trainer")]


def test_an_unreadable_log_keeps_the_last_progress_and_says_so_once_per_streak():
    controller = controller_with({"q-0-worker-0": "progress: iteration 12/50\n"}, poll_seconds=0.001, max_backoff=0.002)
    assert read(controller, RUNNING, EIGHT)[0] == {"q-0": 12}
    del controller.kube.logs["q-0-worker-0"]  # the kubelet is away
    found = []
    for _ in range(4):
        asyncio.run(asyncio.sleep(0.005))  # past the backoff, capped at 0.002 s
        found.append(read(controller, RUNNING, EIGHT))
    assert [progress_ for progress_, _ in found] == [{"q-0": 12}] * 4
    events = [event for _, posted in found for event in posted]
    assert [(t, r) for t, r, _ in events] == [("Warning", "ProgressUnreadable")]
    assert "pod q-0-worker-0" in events[0][2] and "HTTP 204" in events[0][2] and "0.001 s" in events[0][2]
    assert len(controller.kube.reads) == 5  # each try read the one reporting worker


def test_reading_again_after_a_streak_of_failures_is_announced():
    controller = controller_with({}, poll_seconds=0.001)
    assert read(controller, RUNNING, EIGHT)[1][0][1] == "ProgressUnreadable"
    controller.kube.logs["q-0-worker-0"] = "progress: iteration 7/50\n"
    asyncio.run(asyncio.sleep(0.01))  # past the backoff (0.001 s doubled once)
    progress_, events = read(controller, RUNNING, EIGHT)
    assert progress_ == {"q-0": 7}
    assert [(t, r) for t, r, _ in events] == [("Normal", "ProgressReadable")]


def test_nothing_is_read_when_no_trial_runs():
    controller = controller_with({})
    assert read(controller, status_.ExperimentStatus(), [worker("q-0-worker-0", 1)]) == ({}, [])
    assert controller.kube.reads == []


def test_the_schedule_doubles_the_wait_per_failure_up_to_its_cap():
    schedule = polling.PollSchedule(interval=15.0, max_interval=100.0)
    assert schedule.due("k", "t", 0.0)
    assert [schedule.unreadable("k", "t", 0.0)[1] for _ in range(5)] == [15.0, 30.0, 60.0, 100.0, 100.0]
    assert schedule.next_in("k", 0.0) == 100.0
    assert not schedule.due("k", "t", 50.0)
    line = progress_line.Line(42, 50, 0.005)
    assert schedule.read("k", "t", 100.0, [line]) is True  # ends the streak
    assert (schedule.known("k"), schedule.next_in("k", 100.0)) == ({"t": (line,)}, 15.0)
    assert schedule.due("k", "t", 114.5)  # a pass woken a little early still reads
    schedule.keep("k", [])
    assert schedule.known("k") == {} and schedule.next_in("k", 0.0) is None


def test_a_trial_is_read_every_start_up_interval_until_its_first_progress_line_then_every_interval():
    schedule = polling.PollSchedule(interval=15.0, max_interval=100.0, start_interval=2.0, start_window=120.0)
    assert schedule.due("k", "t", 0.0)
    schedule.read("k", "t", 0.0, [])  # its ranks still import and rendezvous: nothing printed yet
    assert schedule.next_in("k", 0.0) == 2.0
    schedule.skipped("k", "t", 2.0)
    assert schedule.next_in("k", 2.0) == 2.0
    schedule.read("k", "t", 4.0, [progress_line.Line(3, 50, 0.005)])
    assert schedule.next_in("k", 4.0) == 15.0  # moving: the steady cadence from now on
    # A trial that never prints a line is read often only within the window.
    assert schedule.due("j", "silent", 0.0)
    schedule.read("j", "silent", 119.0, [])
    assert schedule.next_in("j", 119.0) == 2.0
    schedule.read("j", "silent", 120.0, [])
    assert schedule.next_in("j", 120.0) == 15.0


def test_without_a_start_up_interval_the_schedule_reads_every_interval():
    schedule = polling.PollSchedule(interval=15.0, max_interval=100.0)
    assert schedule.due("k", "t", 0.0)
    schedule.read("k", "t", 0.0, [])
    assert schedule.next_in("k", 0.0) == 15.0

"""A pod of two ranks, as the operator starts it: one `python -m ringleader.runtime` that becomes the pod's agent.

The agent runs as a real process with the environment a pod of `workers.ranksPerPod: 2` renders (its first RANK,
LOCAL_WORLD_SIZE=2, no LOCAL_RANK) and starts two real ranks of a ring on loopback (gloo), which publish live into
a real MLflow store (SQLite), as pods do. A rank SIGKILLed mid-training (as the OOM killer does) ends the pod: its
peer is stopped, publishes what it recorded and is gone; the agent exits as the dead rank did, naming it, and
leaves no process behind. SIGTERM to the agent (the kubelet stopping the pod) reaches both ranks. A pod whose ranks
finish leaves the first worker's trial summary as its message.
"""

import os

# Before MLflow is imported: its telemetry thread starts at import time (ringleader.tracking does the same).
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import json
import pathlib
import signal
import subprocess
import sys
import time

import mlflow.tracking
import pytest
import torch

from ringleader.contract import environment as contract
from ringleader.contract import failures, records
from ringleader.runtime import agent as agent_
from ringleader.runtime import settings
from ringleader.tracking import schema
from ringleader.tracking import settings as tracking_settings
from ringleader.tracking import store as store_

from loopback import free_port

REPOSITORY = pathlib.Path(__file__).resolve().parents[3]
SOURCE = REPOSITORY / "operator"
PEER_TIMEOUT_SECONDS = 20.0
# Failure deadlines, not timings: how long the pod may take to end once a rank died or it was told to stop.
ENDS_WITHIN_SECONDS = agent_.GRACE_SECONDS + 15.0

pytestmark = pytest.mark.timing  # the pod must end within ENDS_WITHIN_SECONDS


class Pod:
    """The agent of one pod of a trial, started as the kubelet would start its container, in a session of its own."""

    def __init__(self, trial, directory: pathlib.Path, extra_env: dict[str, str] | None = None):
        self.trial = trial
        self.output_dir = directory / "output"
        self.message_file = directory / "termination-log"
        self.message_file.write_text("")  # as the kubelet makes /dev/termination-log
        trial_file = directory / "trial.json"
        trial_file.write_text(trial.model_dump_json(by_alias=True))
        [ranks] = [pod for pod in trial.pods() if len(pod) > 1]
        env = contract.PodEnvironment(
            role=ranks[0].role, rank=ranks[0].rank, world_size=trial.world_size, master_addr="127.0.0.1",
            master_port=free_port(), trial_file=str(trial_file), output_dir=str(self.output_dir),
            local_rank=None, local_world_size=len(ranks), group_rank=ranks[0].group_rank,
            termination_file=str(self.message_file))
        assert env.is_agent
        base = {key: value for key, value in os.environ.items() if key not in contract.NAMES}
        self.log = open(directory / "pod.log", "wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ringleader.runtime"], cwd=REPOSITORY, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**base, "PYTHONPATH": str(SOURCE), "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1",
                 **settings.RankSettings(timeout_seconds=PEER_TIMEOUT_SECONDS,
                                         finish_timeout_seconds=3 * PEER_TIMEOUT_SECONDS).to_environ(),
                 **env.to_environ(), **(extra_env or {})})
        self.log_path = directory / "pod.log"

    def ranks(self) -> dict[int, int]:
        """{local rank: pid} of the agent's children, from their own environment."""
        found = {}
        children = subprocess.run(["pgrep", "-P", str(self.process.pid)], capture_output=True, text=True).stdout
        for pid in map(int, children.split()):
            try:
                environ = pathlib.Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            told = dict(item.decode().split("=", 1) for item in environ if b"=" in item)
            if contract.LOCAL_RANK in told:
                found[int(told[contract.LOCAL_RANK])] = pid
        return found

    def iterations_written(self, rank: int) -> int:
        path = records.rank_dir(self.output_dir, self.trial.name, rank) / records.ITERATIONS_FILE
        try:
            return path.read_bytes().count(b"\n")
        except FileNotFoundError:
            return 0

    def wait_until(self, condition, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert self.process.poll() is None, f"the agent exited before {what}:\n{self.log_text()[-4000:]}"
            assert time.monotonic() < deadline, f"{what} not met within {timeout:.0f} s:\n{self.log_text()[-4000:]}"
            time.sleep(0.05)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=10)
        self.log.close()


@pytest.fixture
def start_pod(tmp_path):
    started = []

    def start(trial, extra_env=None) -> Pod:
        pod = Pod(trial, tmp_path, extra_env)
        started.append(pod)
        return pod

    yield start
    for pod in started:
        pod.stop()


def gone(pid: int) -> bool:
    """Neither the process nor any member of the process group it led is left (reaped: not even a zombie)."""
    try:
        os.killpg(pid, 0)
        return False
    except ProcessLookupError:
        return True


def published_steps(client, run_id: str) -> list[int]:
    return sorted(m.step for name in ("time/iteration_ms", "warmup/time/iteration_ms")
                  for m in client.get_metric_history(run_id, name))


def live_tracking(tmp_path, trial):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    store = store_.Store(uri, tracking_settings.TrackingSettings())
    experiment_id = store.ensure_experiment("default/pod")
    trial_run = store.create_run_once(experiment_id, "uid.pod-0", schema.trial_tags(trial, None))
    return uri, experiment_id, trial_run


def endless_pair(make_trial):
    """A ring of 2 workers in one pod of 2 ranks, training until stopped."""
    return make_trial({"workers": {"replicas": 2, "ranksPerPod": 2, "resources": {"cpu": "2"}},
                       "model": {"iterations": 100000, "warmupIterations": 1}})


def test_a_rank_killed_inside_a_pod_ends_its_peer_and_the_pod_names_it_and_the_peers_records_reach_mlflow(
        make_trial, start_pod, tmp_path):
    trial = endless_pair(make_trial)
    uri, experiment_id, trial_run = live_tracking(tmp_path, trial)
    pod = start_pod(trial, {contract.TRACKING_URI: uri, contract.RUN_ID: trial_run})
    pod.wait_until(lambda: all(pod.iterations_written(r) >= 10 for r in (0, 1)), 120, "10 iterations on each rank")
    ranks = pod.ranks()
    assert sorted(ranks) == [0, 1], ranks

    os.kill(ranks[1], signal.SIGKILL)  # rank 1, local rank 1: what the OOM killer does to one process of a pod
    assert pod.process.wait(timeout=ENDS_WITHIN_SECONDS) == 128 + signal.SIGKILL, pod.log_text()
    assert gone(ranks[0]) and gone(ranks[1]), "a rank of the pod outlived its agent"

    message = pod.message_file.read_text()
    assert message.startswith("ringleader: rank 1 (worker-0 local rank 1, killed by SIGKILL) failed: "), message
    assert failures.rank_of([message]) == 1 and not failures.is_echo(failures.reason_of([message]))
    assert "agent: rank 1 (worker-0/1) ended, killed by SIGKILL: stopping the pod's other ranks" in pod.log_text()

    # The peer, stopped by the agent, published every record it had written: all of them reach MLflow, once each.
    on_disk = records.read_iterations(records.rank_dir(pod.output_dir, trial.name, 0) / records.ITERATIONS_FILE)
    client = mlflow.tracking.MlflowClient(uri)
    runs = {int(r.data.tags[schema.TAG_RANK]): r for r in
            client.search_runs([experiment_id], f"tags.`{schema.TAG_PARENT_RUN_ID}` = '{trial_run}'")}
    survivor = runs[0]
    assert survivor.info.status == "KILLED"
    assert published_steps(client, survivor.info.run_id) == [r["step"] for r in on_disk]
    assert (survivor.data.tags[schema.TAG_POD], survivor.data.tags[schema.TAG_LOCAL_RANK]) == ("worker-0", "0")


def test_sigterm_to_the_agent_reaches_every_rank_which_publish_before_the_pod_exits_as_stopped(
        make_trial, start_pod, tmp_path):
    trial = endless_pair(make_trial)
    uri, experiment_id, trial_run = live_tracking(tmp_path, trial)
    pod = start_pod(trial, {contract.TRACKING_URI: uri, contract.RUN_ID: trial_run})
    pod.wait_until(lambda: all(pod.iterations_written(r) >= 5 for r in (0, 1)), 120, "5 iterations on each rank")
    ranks = pod.ranks()
    written_before = {rank: pod.iterations_written(rank) for rank in (0, 1)}

    pod.process.send_signal(signal.SIGTERM)  # the kubelet signals the container's first process only
    assert pod.process.wait(timeout=ENDS_WITHIN_SECONDS) == 128 + signal.SIGTERM, pod.log_text()
    assert all(gone(pid) for pid in ranks.values())
    assert pod.message_file.read_text() == ""  # no rank failed: a stopped pod, not a failed one

    client = mlflow.tracking.MlflowClient(uri)
    runs = client.search_runs([experiment_id], f"tags.`{schema.TAG_PARENT_RUN_ID}` = '{trial_run}'")
    assert sorted(r.info.status for r in runs) == ["KILLED", "KILLED"]
    for run in runs:
        rank = int(run.data.tags[schema.TAG_RANK])
        on_disk = records.read_iterations(records.rank_dir(pod.output_dir, trial.name, rank) / records.ITERATIONS_FILE)
        published = published_steps(client, run.info.run_id)
        # Everything recorded before the signal is in MLflow, in order, once each (a rank still training while it
        # publishes may record a few iterations more, on disk only).
        assert len(published) >= written_before[rank]
        assert published == [r["step"] for r in on_disk][:len(published)]


def test_a_pod_whose_ranks_finish_exits_0_with_the_first_workers_summary_each_rank_on_its_share_of_the_cpus(
        make_trial, start_pod):
    trial = make_trial({"workers": {"replicas": 2, "ranksPerPod": 2, "resources": {"cpu": "2"}}})
    pod = start_pod(trial)
    assert pod.process.wait(timeout=180) == 0, pod.log_text()
    summary = json.loads(pod.message_file.read_text())  # what the operator reads as the trial's summary
    assert summary["throughput"] > 0
    assert "agent: pod worker-0 starts ranks 0..1" in pod.log_text()
    config = json.loads(next(line for line in pod.log_text().splitlines() if line.startswith("config: "))[8:])
    assert (config["ranksPerPod"], config["threadsPerRank"]) == (2, 1)  # 2 CPUs split between 2 ranks
    whole = json.loads((records.trial_dir(pod.output_dir, trial.name) / records.SUMMARY_FILE).read_text())
    usage = whole["usage"]
    assert {rank: (used["pod"], used["localRank"], used["threads"]) for rank, used in usage.items()} == {
        "0": ("worker-0", 0, 1), "1": ("worker-0", 1, 1)}


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="a pod of 2 GPU ranks needs 2 CUDA devices")
def test_a_gpu_pod_of_two_ranks_puts_each_on_cuda_local_rank_and_allreduces_over_nccl(make_trial, start_pod):
    """The GPU check (unverified without 2 GPUs): `pytest tests/integration/runtime/test_pod_agent.py -k gpu`."""
    trial = make_trial({"workers": {"replicas": 2, "resources": {"cpu": "2", "gpu": 2}}})  # ranksPerPod: 2 GPUs
    # What the device plugin gives a pod of 2 GPUs; NCCL bootstraps over loopback only, like every test.
    pod = start_pod(trial, {"CUDA_VISIBLE_DEVICES": "0,1", "NCCL_SOCKET_IFNAME": "lo"})
    assert pod.process.wait(timeout=300) == 0, pod.log_text()[-4000:]
    assert "rank 0 (worker-0/0) on cuda:0" in pod.log_text() and "rank 1 (worker-0/1) on cuda:1" in pod.log_text()
    config = json.loads(next(line for line in pod.log_text().splitlines() if line.startswith("config: "))[8:])
    assert (config["backend"], config["ranksPerPod"]) == ("cpu:gloo,cuda:nccl", 2)
    assert json.loads(pod.message_file.read_text())["throughput"] > 0

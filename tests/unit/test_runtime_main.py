"""How a rank reads its slot: threads from the CPU request, the device, the backend, and failure wording."""

import json

import pytest
import torch
import torch.distributed as dist

from ringleader.api import spec as spec_
from ringleader.api import trial as trial_
from ringleader.contract import environment as contract
from ringleader.runtime import ending, main, termination_message


def trial_of(**spec) -> trial_.Trial:
    return trial_.Trial(experiment="e", name="e-0", index=0, spec=spec_.ExperimentSpec.model_validate(spec))


@pytest.mark.parametrize("cpu, threads", [("500m", 1), ("1", 1), ("2", 2), ("2500m", 2), ("3.5", 3)])
def test_threads_are_the_whole_cpus_requested(cpu, threads):
    slot = trial_of(workers={"resources": {"cpu": cpu}}).worker_slots()[0]
    assert main.cpu_threads(slot) == threads


@pytest.mark.parametrize("cpu, ranks_per_pod, threads", [("4", 2, 2), ("3", 2, 1), ("1", 4, 1), ("8", 8, 1)])
def test_ranks_of_one_pod_split_its_whole_cpus_at_least_one_thread_each(cpu, ranks_per_pod, threads):
    trial = trial_of(workers={"replicas": 8, "ranksPerPod": ranks_per_pod, "resources": {"cpu": cpu}})
    assert {main.cpu_threads(slot) for slot in trial.worker_slots()} == {threads}


def test_each_gpu_rank_of_a_pod_trains_on_its_local_rank(monkeypatch):
    chosen = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    slots = trial_of(architecture="RingAllReduce", workers={"replicas": 4, "resources": {"gpu": 2}}).worker_slots()
    assert [main.pick_device(slot) for slot in slots] == [torch.device("cuda", i) for i in (0, 1, 0, 1)]
    assert chosen == [0, 1, 0, 1]  # ranks 0 and 2 are local rank 0 of their pods


def test_gpus_requested_without_cuda_fall_back_to_the_cpu_with_a_warning(capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    slot = trial_of(workers={"resources": {"gpu": 1}}).worker_slots()[0]
    assert main.pick_device(slot) == torch.device("cpu")
    assert "asked for 1 GPU(s) but CUDA is not available" in capsys.readouterr().err
    assert main.pick_device(trial_of().slots()[0]) == torch.device("cpu")


def test_nccl_is_used_only_for_ring_allreduce_on_cuda():
    ring = trial_of(architecture="RingAllReduce")
    assert main.backend_for(ring, torch.device("cuda", 0)) == "cpu:gloo,cuda:nccl"
    assert main.backend_for(ring, torch.device("cpu")) == "gloo"
    assert main.backend_for(trial_of(architecture="ParameterServer"), torch.device("cuda", 0)) == "gloo"


def test_a_lost_peer_is_named_as_such():
    reason = ending.describe(dist.DistNetworkError("Connection reset by peer\nmore detail"))
    assert reason == "lost contact with a peer rank (it died, hung or is unreachable): Connection reset by peer"
    assert ending.describe(ValueError("bad value")) == "ValueError: bad value"


def test_no_publisher_without_a_tracking_run(tmp_path):
    env = contract.PodEnvironment("worker", 0, 1, "127.0.0.1", 1, "t.json", str(tmp_path))
    assert main.start_publisher(env, trial_of(), tmp_path) is None


def test_a_missing_or_invalid_trial_file_is_named(tmp_path):
    with pytest.raises(main.RankError, match=r"trial file .*none.json not found \(RINGLEADER_TRIAL_FILE\)"):
        main.load_trial(str(tmp_path / "none.json"))
    (tmp_path / "bad.json").write_text('{"name": 1}')
    with pytest.raises(main.RankError, match=r"trial file .*bad.json is not a valid trial"):
        main.load_trial(str(tmp_path / "bad.json"))


def test_in_a_pod_the_summary_also_becomes_the_termination_message(tmp_path, monkeypatch):
    termination_log = tmp_path / "termination-log"
    termination_log.write_text("")
    monkeypatch.setattr(termination_message, "TERMINATION_LOG", str(termination_log))
    env = contract.PodEnvironment("worker", 0, 1, "127.0.0.1", 1, "t.json", str(tmp_path / "out"))
    trial = trial_of()
    summary = {"throughput": 10.0, "stragglerRank": 1, "perRank": {str(r): {"iterations": r} for r in range(500)}}
    (tmp_path / "out" / trial.name).mkdir(parents=True)
    main.write_trial_summary(trial, env, summary)
    assert json.loads((tmp_path / "out" / trial.name / "summary.json").read_text()) == summary
    message = termination_log.read_text()
    assert len(message) <= 4096 and json.loads(message)["throughput"] == 10.0


def test_outside_a_pod_there_is_no_termination_message(tmp_path, monkeypatch):
    monkeypatch.setattr(termination_message, "TERMINATION_LOG", str(tmp_path / "absent"))
    env = contract.PodEnvironment("worker", 0, 1, "127.0.0.1", 1, "t.json", str(tmp_path))
    (tmp_path / trial_of().name).mkdir()
    main.write_trial_summary(trial_of(), env, {"throughput": 1.0})
    assert not (tmp_path / "absent").exists()

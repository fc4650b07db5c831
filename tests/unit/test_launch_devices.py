"""Which GPU each local rank gets (one of its own for the ring's NCCL), and the rings refused for want of GPUs."""

from __future__ import annotations

import sys

from ringleader.api import experiment, trial
from ringleader.launch import devices, trials


def a_trial(architecture: str, workers: int, gpu: int) -> trial.Trial:
    return trial.expand(experiment.parse({
        "apiVersion": "ringleader.dev/v1alpha1", "kind": "DistributedTrainingExperiment", "metadata": {"name": "g"},
        "spec": {"architecture": architecture, "workers": {"replicas": workers, "resources": {"gpu": gpu}}},
    })).trials[0]


def test_each_ring_rank_gets_a_gpu_of_its_own_in_rank_order():
    assert devices.assign(a_trial("RingAllReduce", 2, 1), ["0", "1"]) == {0: "0", 1: "1"}
    # 2 GPUs a pod: a pod of 2 ranks (one rank per GPU), both seeing the pod's devices, each on cuda:LOCAL_RANK.
    assert devices.assign(a_trial("RingAllReduce", 4, 2), ["4", "5", "6", "7"]) == {0: "4,5", 1: "4,5", 2: "6,7",
                                                                                      3: "6,7"}


def test_a_ring_of_pods_of_several_ranks_is_refused_by_its_pods_gpus_and_told_how_many_workers_fit():
    ring = a_trial("RingAllReduce", 4, 2)
    assert devices.refusal("f.yaml", [ring], ["0", "1", "2", "3"]) is None
    assert "it asks for 4 GPUs and 2 are visible here (CUDA_VISIBLE_DEVICES=0,1). Run 2 workers" in devices.refusal(
        "f.yaml", [ring], ["0", "1"])


def test_parameter_server_workers_share_gpus_round_robin_and_the_server_gets_none():
    ps = a_trial("ParameterServer", 4, 1)
    assigned = devices.assign(ps, ["0", "1"])
    assert sorted(assigned.values()) == ["0", "0", "1", "1"]
    assert all(slot.role == "worker" for slot in ps.slots() if slot.rank in assigned)
    assert devices.refusal("f.yaml", [ps], ["0", "1"]) is None


def test_a_ring_asking_for_more_gpus_than_are_visible_is_refused_with_the_alternatives():
    ring = a_trial("RingAllReduce", 4, 1)
    assert devices.refusal("f.yaml", [ring], ["0"]) == (
        "f.yaml: trial g-0 runs the ring on NCCL, which needs a GPU of its own per rank: it asks for 4 GPUs and 1 is "
        "visible here (CUDA_VISIBLE_DEVICES=0). Run 1 worker (`workers.replicas: 1`), or set "
        "`workers.resources.gpu: 0` to run the ring on gloo on the CPU")
    assert devices.refusal("f.yaml", [ring], []).endswith(
        "it asks for 4 GPUs and 0 are visible here. Set `workers.resources.gpu: 0` to run the ring on gloo on the CPU")
    assert devices.refusal("f.yaml", [ring], ["0", "1", "2", "3"]) is None


def test_the_visible_gpus_are_the_users_list_and_torch_is_not_imported_when_none_is_asked_for(monkeypatch):
    ring = a_trial("RingAllReduce", 2, 1)
    assert devices.visible({"CUDA_VISIBLE_DEVICES": "2, 3"}, [ring]) == ["2", "3"]
    assert devices.visible({"CUDA_VISIBLE_DEVICES": ""}, [ring]) == []
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert devices.visible({}, [a_trial("RingAllReduce", 2, 0)]) == []
    assert "torch" not in sys.modules


def test_a_gpu_rank_sees_only_its_own_devices(tmp_path):
    slot = a_trial("RingAllReduce", 2, 1).slots()[1]
    environ = trials.rank_environ({"CUDA_VISIBLE_DEVICES": "0,1", "PATH": "/usr/bin"}, slot, 2, 29500,
                                  tmp_path / "trial.json", tmp_path, gpus="1")
    assert environ["CUDA_VISIBLE_DEVICES"] == "1"


def test_the_ranks_of_a_local_pod_see_its_gpus_and_get_torchruns_environment(tmp_path):
    ring = a_trial("RingAllReduce", 4, 2)  # 2 pods of 2 ranks
    gpus = devices.assign(ring, ["0", "1", "2", "3"])
    slot = ring.slots()[3]
    environ = trials.rank_environ({"PATH": "/usr/bin"}, slot, 4, 29500, tmp_path / "trial.json", tmp_path,
                                  gpus=gpus[slot.rank])
    assert {name: environ[name] for name in ("RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK",
                                             "CUDA_VISIBLE_DEVICES")} == {
        "RANK": "3", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1", "NODE_RANK": "1",
        "CUDA_VISIBLE_DEVICES": "2,3"}

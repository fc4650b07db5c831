"""How a rank reads its slot: threads from the CPU request, the device, the backend, and failure wording."""

import pytest
import torch
import torch.distributed as dist

from ringleader.api import spec as spec_
from ringleader.api import trial as trial_
from ringleader.runtime import main


def trial_of(**spec) -> trial_.Trial:
    return trial_.Trial(experiment="e", name="e-0", index=0, spec=spec_.ExperimentSpec.model_validate(spec))


@pytest.mark.parametrize("cpu, threads", [("500m", 1), ("1", 1), ("2", 2), ("2500m", 2), ("3.5", 3)])
def test_threads_are_the_whole_cpus_requested(cpu, threads):
    slot = trial_of(workers={"resources": {"cpu": cpu}}).slots()[0]
    assert main.cpu_threads(slot) == threads


def test_gpus_requested_without_cuda_fall_back_to_the_cpu_with_a_warning(capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    slot = trial_of(workers={"resources": {"gpu": 1}}).slots()[0]
    assert main.pick_device(slot) == torch.device("cpu")
    assert "asked for 1 GPU(s) but CUDA is not available" in capsys.readouterr().err
    assert main.pick_device(trial_of().slots()[0]) == torch.device("cpu")


def test_nccl_is_used_only_for_ring_allreduce_on_cuda():
    ring = trial_of(architecture="RingAllReduce")
    assert main.backend_for(ring, torch.device("cuda", 0)) == "cpu:gloo,cuda:nccl"
    assert main.backend_for(ring, torch.device("cpu")) == "gloo"
    assert main.backend_for(trial_of(architecture="ParameterServer"), torch.device("cuda", 0)) == "gloo"


def test_a_lost_peer_is_named_as_such():
    reason = main.describe(dist.DistNetworkError("Connection reset by peer\nmore detail"))
    assert reason == "lost contact with a peer rank (it died, hung or is unreachable): Connection reset by peer"
    assert main.describe(ValueError("bad value")) == "ValueError: bad value"


def test_no_publisher_without_a_tracking_run(tmp_path):
    from ringleader.runtime import contract

    env = contract.PodEnvironment("worker", 0, 1, "127.0.0.1", 1, "t.json", str(tmp_path))
    assert main.start_publisher(env, trial_of(), tmp_path) is None

"""Ring allreduce's bucketing (DDP's order and size rule) and its single-worker degenerate case."""

import torch

from ringleader.contract import keys
from ringleader.runtime import optimizers, ring, timing
from ringleader.api import spec as spec_
from ringleader.api import trial as trial_
from ringleader.contract import environment as contract


def test_buckets_follow_reverse_parameter_order_and_close_at_the_size():
    model = torch.nn.Sequential(torch.nn.Linear(10, 10), torch.nn.Linear(10, 10), torch.nn.Linear(10, 2))
    parameters = list(model.parameters())
    buckets = ring.make_buckets(parameters, bucket_bytes=400)
    order = [p for bucket in buckets for p in bucket.parameters]
    assert order == parameters[::-1]
    # A bucket closes once it holds at least 400 bytes: (2.bias 8 + 2.weight 80 + 1.bias 40 + 1.weight 400), ...
    assert [len(b.parameters) for b in buckets] == [4, 2]
    assert buckets[0].bytes == 4 * (2 + 20 + 10 + 100)
    assert sum(b.bytes for b in buckets) == 4 * sum(p.numel() for p in parameters)


def test_one_big_bucket_when_the_model_is_small():
    model = torch.nn.Linear(4, 4)
    (bucket,) = ring.make_buckets(list(model.parameters()), bucket_bytes=25 * 1024 * 1024)
    assert bucket.buffer.shape == (20,) and len(bucket.views) == 2


def test_a_single_worker_ring_only_updates():
    spec = spec_.ExperimentSpec.model_validate({"architecture": "RingAllReduce", "workers": {"replicas": 1},
                                                "model": {"optimizer": {"learningRate": 0.5}}})
    trial = trial_.Trial(experiment="e", name="e-0", index=0, spec=spec)
    env = contract.PodEnvironment("worker", 0, 1, "127.0.0.1", 1, "trial.json", "/tmp")
    synchronizer = ring.RingSynchronizer(trial, env, torch.device("cpu"))
    model = torch.nn.Linear(2, 1, bias=False)
    torch.nn.init.ones_(model.weight)
    synchronizer.attach(model, optimizers.factory(spec.model.optimizer))
    assert synchronizer.bytes_per_iteration == 0.0
    model(torch.ones(1, 2)).sum().backward()
    timer = timing.IterationTimer(0, torch.device("cpu"))
    timer.begin(0)
    synchronizer.synchronize(0, timer)
    metrics = timer.finish()
    assert torch.allclose(model.weight, torch.full((1, 2), 0.5))
    assert metrics[keys.TIME_COMM] == 0.0 and metrics[keys.TIME_UPDATE] > 0.0

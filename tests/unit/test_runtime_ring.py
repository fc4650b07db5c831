"""Ring allreduce's bucketing (DDP's order and size rule, its small first bucket, gradients as views of the
buckets) and its single-worker degenerate case; tests/integration/runtime/test_ring_buckets.py runs it on two ranks."""

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


def test_the_first_bucket_closes_at_its_own_smaller_size():
    model = torch.nn.Sequential(*(torch.nn.Linear(10, 10, bias=False) for _ in range(6)))
    parameters = list(model.parameters())  # 400 bytes each
    buckets = ring.make_buckets(parameters, bucket_bytes=1000, first_bucket_bytes=400)
    # The first bucket (the last layer) closes at 400 bytes, the others at 1000: 1, then 3, then the 2 left.
    assert [len(b.parameters) for b in buckets] == [1, 3, 2]
    assert buckets[0].parameters == [parameters[-1]]


def test_a_first_bucket_size_above_the_bucket_size_does_not_grow_the_first_bucket():
    model = torch.nn.Sequential(*(torch.nn.Linear(10, 10, bias=False) for _ in range(4)))
    buckets = ring.make_buckets(list(model.parameters()), bucket_bytes=400, first_bucket_bytes=ring.FIRST_BUCKET_BYTES)
    assert [len(b.parameters) for b in buckets] == [1, 1, 1, 1]


def test_a_buckets_gradients_are_views_of_its_buffer_shaped_like_their_parameters():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(), torch.nn.Linear(4, 2))
    (bucket,) = ring.make_buckets(list(model.parameters()), bucket_bytes=1 << 20)
    for grad, parameter in zip(bucket.grads, bucket.parameters):
        assert grad.shape == parameter.shape and grad.is_contiguous()
        grad.fill_(1.0)
    # Writing through every view fills the buffer the allreduce sends, all of it and nothing twice.
    assert torch.equal(bucket.buffer, torch.ones_like(bucket.buffer))
    assert bucket.grads[0].data_ptr() == bucket.buffer.data_ptr()


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
    synchronizer.backward(model(torch.ones(1, 2)).sum())
    timer = timing.IterationTimer(0, torch.device("cpu"))
    timer.begin(0)
    synchronizer.synchronize(0, timer)
    metrics = timer.finish()
    assert torch.allclose(model.weight, torch.full((1, 2), 0.5))
    assert metrics[keys.TIME_COMM] == 0.0 and metrics[keys.TIME_UPDATE] > 0.0

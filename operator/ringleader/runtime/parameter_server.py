"""A ParameterServer trial's two roles: `serve` (a ps rank's loop) and `WorkerSynchronizer` (a worker's exchange).

main.py calls `serve(trial, env, recorder)` on ranks 0..k-1 (ps-0..ps-k-1) and gives workers a
`WorkerSynchronizer(trial, env, device)`. The k servers hold shards of equal bytes, element ranges
of the flattened parameters (exchange/shards.py); each holds a gate of the paradigm and answers a
worker when its gate lets it go (paradigms.py says why the k gates agree; under DSSP ps-0 runs the
controller); the messages travel as gloo point-to-point on a process group of their own
(exchange/link.py). A server exits when every worker has said it is done, and raises a
ServerError naming the worker when one dies (its socket closes) or stays silent past
RINGLEADER_TIMEOUT_SECONDS; main.py turns that into exit status 1 with the reason on stderr.

Bandwidth emulation (spec.network.bandwidth) applies to every pod's card, both ways (nic.pod_card): a server's
N replies leave one after another at that rate, and N pushes arriving at once queue on its
ingress, which is the congestion the 1PS-vs-kPS study measures. ParameterServerPodAggregation's servers hear
one worker per pod (pusher_ranks, pod_aggregation.py).
"""

from __future__ import annotations

import torch

from ringleader.api import constants, variants
from ringleader.api.spec import DataFormat
from ringleader.api.trial import Slot, Trial
from ringleader.contract import environment as contract
from ringleader.contract import levels as levels_
from ringleader.runtime import compression, datasets, exchange, interfaces, models, optimizers, paradigms, settings


def server_ranks(trial: Trial) -> list[int]:
    return [s.rank for s in trial.slots() if s.role == constants.ROLE_PS]


def pusher_ranks(trial: Trial) -> list[int]:
    """The workers the servers hear: every worker, or each pod's first where the pod's ranks add up first
    (api/variants.py pod_pushes; pod_aggregation.py)."""
    pod_pushes = variants.ARCHITECTURES[trial.spec.architecture].pod_pushes
    return [s.rank for s in trial.worker_slots() if not pod_pushes or s.local_rank == 0]


def server_device(slot: Slot) -> torch.device:
    """The GPU main.py selected when the server's slot asked for one; otherwise the CPU."""
    if slot.resources.gpu > 0 and torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def serve(trial: Trial, env: contract.PodEnvironment, recorder: interfaces.Recorder,
          knobs: settings.RankSettings = settings.RankSettings(), levels: levels_.Levels | None = None) -> None:
    """Serve this rank's shard until every worker it hears (pusher_ranks) is done; records one line per aggregation."""
    spec = trial.spec
    timeout = knobs.timeout_seconds
    servers = server_ranks(trial)
    workers = pusher_ranks(trial)
    owner = servers.index(env.rank)
    device = server_device(trial.slots()[env.rank])
    link = exchange.endpoint.open_link(trial, env.rank, timeout, requests_from=workers, replies_from=[], levels=levels)

    # The shard: the same seeded model every rank builds, cut by the plan every rank computes.
    shape = None if spec.data.format == DataFormat.SYNTHETIC else datasets.describe(spec.data, env.data_dir)
    parameters = exchange.shards.trainable(models.build(spec.model, spec.data.synthetic, shape))
    plan = exchange.shards.Partition.of(parameters, len(servers))
    shard = [p.detach().to(device) for p in plan.shard(owner, parameters)]
    gate = paradigms.make_gate(spec.sync, len(workers), owner=owner)

    server = exchange.server.ShardServer(
        rank=env.rank, shard=shard, optimizer_factory=optimizers.factory(spec.model.optimizer), workers=workers,
        gate=gate, link=link, owner=owner, owners=len(servers),
        warmup_iterations=spec.model.warmup_iterations, name=f"parameter server ps-{owner}",
        codec=compression.MessageCodec(spec.compression.method),
    )
    print(f"ps-{owner}: {len(shard)} piece(s), {server.layout.nbytes} bytes, {len(workers)} worker(s), "
          f"{spec.sync.paradigm.value} ({type(gate).__name__} gate)", flush=True)
    link.start(server.layout.nbytes)
    exchange.server.run(server, link.inbox, timeout, recorder.log_iteration)
    link.close(timeout)


class WorkerSynchronizer:
    """interfaces.Synchronizer of a ParameterServer worker: push to every server, wait for every server's answer."""

    def __init__(self, trial: Trial, env: contract.PodEnvironment, device: torch.device,
                 knobs: settings.RankSettings = settings.RankSettings(), levels: levels_.Levels | None = None):
        # `device` is where the model already is: gradients are copied from it and weights into it.
        spec = trial.spec
        self.timeout = knobs.timeout_seconds
        servers = server_ranks(trial)
        self.link = exchange.endpoint.open_link(trial, env.rank, self.timeout, requests_from=[], replies_from=servers,
                                                levels=levels)
        self.client = exchange.client.Client(self.link, env.rank, servers, spec.model.iterations, self.timeout,
                                             compression.MessageCodec(spec.compression.method))

    def attach(self, model: torch.nn.Module, optimizer_factory) -> None:
        # The optimizer runs on the servers; the worker only computes gradients.
        self.client.attach(model)

    def backward(self, loss: torch.Tensor) -> None:
        self.client.backward(loss)

    def synchronize(self, step: int, timer: interfaces.Timer) -> None:
        self.client.synchronize(step, timer)

    def should_stop(self, due: bool, reached: bool, timer: interfaces.Timer) -> bool:
        return self.client.should_stop(reached, timer)

    def close(self) -> None:
        try:
            self.client.close()
        finally:
            self.link.close(self.timeout if self.client.steps >= self.client.iterations else 0.0)

"""PeerToPeer synchronization (interfaces.Synchronizer): every peer is a worker and the server of a 1/N shard.

main.py gives each worker rank a `PeerSynchronizer(trial, env, device)`. Gradient shards (1/N of
the model's bytes each, exchange/shards.py) go straight to their owners (an all-to-all of N(N-1)
flows, sent in a rotation so that no peer hears two at once: exchange/schedule.py), owners update
their shard and send it back. The shard server runs in a thread of the
peer's process (exchange.server.run over the link's inbox); the worker side (exchange/client.py)
runs in the training loop. Every peer's shard server holds a gate of the paradigm: under BSP each
peer is its own shard's barrier, answering once the round's N gradients of its shard are in, and no
central decision sits on the data path (paradigms.py says why the N gates agree, and how DSSP's
grants, decided by peer 0, travel with the data); a peer's push to its own shard skips the network.
Both threads share one link (exchange/endpoint.py builds it): each sends its own frames, one receiver
thread per remote peer receives for both (exchange/link.py), so no two threads ever wait on the same
(peer, tag).

A peer's close() waits for its own server to hear DONE from every peer: the last peer to finish
still needs everyone's shard. If the server thread fails (a peer died or went silent), the worker
is told at its next wait and the rank fails with the server's reason.
"""

from __future__ import annotations

import collections
import threading

import torch

from ringleader.api.trial import Trial
from ringleader.contract import environment as contract
from ringleader.contract import keys
from ringleader.contract import levels as levels_
from ringleader.runtime import compression, exchange, interfaces, paradigms, settings


class PeerSynchronizer:
    """A peer: pushes shards to every peer, serves its own shard in a thread."""

    def __init__(self, trial: Trial, env: contract.PodEnvironment, device: torch.device,
                 knobs: settings.RankSettings = settings.RankSettings(), levels: levels_.Levels | None = None):
        # `device` is where the model already is; the shard server keeps its shard there too.
        self.spec = trial.spec
        self.rank = env.rank
        self.timeout = knobs.timeout_seconds
        self.peers = [s.rank for s in trial.worker_slots()]
        self.link = exchange.endpoint.open_link(trial, env.rank, self.timeout, requests_from=self.peers,
                                                replies_from=self.peers, levels=levels)
        self.codec = compression.MessageCodec(self.spec.compression.method)
        self.client = exchange.client.Client(self.link, env.rank, self.peers, self.spec.model.iterations, self.timeout,
                                             self.codec)
        self.server: exchange.server.ShardServer | None = None
        self.server_thread: threading.Thread | None = None
        self.server_error: BaseException | None = None
        # The shard server's aggregations since the worker's last iteration (appended by the server thread).
        self.aggregations: collections.deque[dict[str, float]] = collections.deque()

    def attach(self, model: torch.nn.Module, optimizer_factory) -> None:
        owner = self.peers.index(self.rank)
        parameters = exchange.shards.trainable(model)
        plan = exchange.shards.Partition.of(parameters, len(self.peers))
        self.server = server = exchange.server.ShardServer(
            rank=self.rank, shard=plan.shard(owner, parameters), optimizer_factory=optimizer_factory,
            workers=self.peers, gate=paradigms.make_gate(self.spec.sync, len(self.peers), owner=owner),
            link=self.link, warmup_iterations=self.spec.model.warmup_iterations, name=f"peer {owner}'s shard server",
            codec=self.codec,
        )
        self.server_thread = threading.Thread(target=self._serve, args=(server,), daemon=True,
                                              name="ringleader-shard-server")
        self.server_thread.start()
        # Starts the shared link's receivers too, sized for the largest shard (this peer's own is one of them).
        self.client.attach(model)

    def _serve(self, server: exchange.server.ShardServer) -> None:
        try:
            exchange.server.run(server, self.link.inbox, self.timeout,
                                lambda _step, metrics: self.aggregations.append(metrics))
        except BaseException as error:  # noqa: BLE001 - the worker must hear, or it would wait for replies that never come
            self.server_error = error
            self.link.fail_worker(str(error))

    def backward(self, loss: torch.Tensor) -> None:
        self.client.backward(loss)

    def synchronize(self, step: int, timer: interfaces.Timer) -> None:
        self.client.synchronize(step, timer)
        self._record_server(timer)

    def _record_server(self, timer: interfaces.Timer) -> None:
        """Fold this peer's shard-server work since the last iteration into the iteration's record:
        aggregation seconds summed, the deepest queue, and (peer 0, DSSP) the last threshold granted."""
        seconds, depth, threshold = 0.0, None, None
        while self.aggregations:
            metrics = self.aggregations.popleft()
            seconds += metrics[keys.SERVER_AGGREGATION]
            depth = max(depth or 0.0, metrics[keys.SERVER_QUEUE_DEPTH])
            threshold = metrics.get(keys.SERVER_THRESHOLD, threshold)
        if depth is None:
            return
        timer.set(keys.SERVER_AGGREGATION, seconds)
        timer.set(keys.SERVER_QUEUE_DEPTH, depth)
        if threshold is not None:
            timer.set(keys.SERVER_THRESHOLD, threshold)

    def should_stop(self, due: bool, reached: bool, timer: interfaces.Timer) -> bool:
        return self.client.should_stop(reached, timer)

    def close(self) -> None:
        finished = self.client.steps >= self.client.iterations
        try:
            self.client.close()
            if finished and self.server_thread is not None:
                # The others may still be training and need this peer's shard until they are done. No bound
                # here: the server's own inactivity timeout ends it if they stop talking.
                self.server_thread.join()
                if self.server_error is not None:
                    raise exchange.link.LinkError(f"this peer's shard server failed: {self.server_error}")
        finally:
            self.link.close(self.timeout if finished else 0.0)

"""A shard server's arithmetic and protocol, shards, the wire format and the emulated NIC, all in one process.

Only the transport is replaced, by `Outbox`, which keeps what the server sends; the multi-process
tests (tests/integration/runtime_ps/test_ps_paradigms_on_ranks.py) run the same server over gloo.
"""

from __future__ import annotations

import queue
import threading
import time

import pytest
import torch

from ringleader.api import spec as spec_
from ringleader.contract import keys
from ringleader.runtime import exchange, optimizers, paradigms, shaping

SERVER, WORKERS = 0, [1, 2]
LEARNING_RATE = 0.1


class Outbox:
    """Stands in for exchange.link.Link on the server's side: keeps every message, with its destination."""

    def __init__(self):
        self.sent: list[tuple[int, exchange.wire.Message]] = []

    def send(self, destination: int, message: exchange.wire.Message) -> None:
        self.sent.append((destination, message))

    def take(self) -> list[tuple[int, exchange.wire.Message]]:
        sent, self.sent = self.sent, []
        return sent


def make_server(gate: paradigms.Gate | None, averages_rounds: bool = False, momentum: float = 0.0):
    outbox = Outbox()
    shard = [torch.ones(2, 2), torch.zeros(3)]
    server = exchange.server.ShardServer(
        rank=SERVER, shard=shard, workers=WORKERS, gate=gate, averages_rounds=averages_rounds, link=outbox,
        optimizer_factory=optimizers.factory(spec_.Optimizer(learningRate=LEARNING_RATE, momentum=momentum)),
    )
    return server, outbox


def push(server, worker: int, count: int, gradients: list[torch.Tensor], at: float = 0.0):
    payload = server.layout.pack(gradients)
    message = exchange.wire.Message(exchange.wire.Kind.PUSH, worker, count=count, payload=payload, received_at=at)
    return server.handle(message)


def weights_of(server, message: exchange.wire.Message) -> list[torch.Tensor]:
    return server.layout.views(message.payload)


def gradients(value: float) -> list[torch.Tensor]:
    return [torch.full((2, 2), value), torch.full((3,), value)]


# ---------------------------------------------------------------------------------------------
# Aggregation


def test_bsp_averages_the_round_and_releases_everyone_with_the_same_weights():
    server, outbox = make_server(paradigms.BSP(2), averages_rounds=True)
    assert push(server, 1, 1, gradients(1.0)) is None  # half a round: nothing applied, nobody answered
    assert outbox.take() == []
    metrics = push(server, 2, 1, gradients(3.0))
    replies = outbox.take()
    assert [destination for destination, _ in replies] == [1, 2]
    expected = 1.0 - LEARNING_RATE * 2.0  # the mean gradient is 2
    for _, reply in replies:
        assert reply.kind == exchange.wire.Kind.REPLY and reply.clock == 1 and reply.version == 1
        assert torch.allclose(weights_of(server, reply)[0], torch.full((2, 2), expected))
    assert replies[0][1].payload is replies[1][1].payload  # one copy of the weights for everyone
    assert metrics[keys.SERVER_AGGREGATION] > 0 and metrics[keys.SERVER_QUEUE_DEPTH] == 0.0


def test_asp_applies_each_push_at_once_with_the_learning_rate_divided_by_the_workers():
    server, outbox = make_server(paradigms.ASP(2))
    push(server, 1, 1, gradients(1.0))
    (destination, reply), = outbox.take()
    assert destination == 1 and reply.clock == 0  # worker 2 has pushed nothing yet
    assert torch.allclose(weights_of(server, reply)[0], torch.full((2, 2), 1.0 - LEARNING_RATE / 2))


def test_a_held_ok_reports_how_long_the_gate_held_it():
    server, outbox = make_server(paradigms.SSP(2, staleness=0))
    push(server, 1, 1, gradients(1.0))
    assert outbox.take() == []
    push(server, 2, 1, gradients(1.0))
    held = {destination: reply.held for destination, reply in outbox.take()}
    assert held[1] > held[2] >= 0.0  # worker 1 waited for worker 2's push; worker 2 not at all


def test_dssp_records_the_threshold_it_granted():
    gate = paradigms.DSSP(2, lower=0, upper=3)
    server, outbox = make_server(gate)
    server.handle(exchange.wire.Message(exchange.wire.Kind.PULL, 1, count=0, received_at=0.0))
    server.handle(exchange.wire.Message(exchange.wire.Kind.PULL, 2, count=0, received_at=0.0))
    push(server, 2, 1, gradients(1.0), at=3.0)  # the slow worker: one interval of 3 s
    metrics = push(server, 1, 1, gradients(1.0), at=1.0)  # 0 ahead: OK, no controller
    assert keys.SERVER_THRESHOLD not in metrics
    metrics = push(server, 1, 2, gradients(1.0), at=2.0)  # 1 ahead of s_L = 0 -> controller
    assert gate.last_grant is not None
    assert metrics[keys.SERVER_THRESHOLD] == gate.last_grant.threshold
    assert 0 <= metrics[keys.SERVER_THRESHOLD] <= 3


# ---------------------------------------------------------------------------------------------
# Pulls, done, failures


def test_a_follower_answers_a_pull_only_once_it_holds_what_the_gate_released():
    server, outbox = make_server(gate=None)
    push(server, 1, 1, gradients(1.0))
    server.handle(exchange.wire.Message(exchange.wire.Kind.PULL, 1, count=1, clock=1))
    assert outbox.take() == [], "worker 2's first push is not in yet: clock 0 < 1"
    push(server, 2, 1, gradients(1.0))
    (destination, reply), = outbox.take()
    assert destination == 1 and reply.clock == 1 and reply.version == 2


def test_the_initial_pull_is_answered_at_once_with_the_initial_weights():
    server, outbox = make_server(paradigms.BSP(2), averages_rounds=True)
    server.handle(exchange.wire.Message(exchange.wire.Kind.PULL, 2, count=0, clock=0))
    (destination, reply), = outbox.take()
    assert destination == 2 and torch.equal(weights_of(server, reply)[0], torch.ones(2, 2))


def test_pushes_must_arrive_in_order():
    server, _ = make_server(paradigms.ASP(2))
    with pytest.raises(exchange.server.ServerError, match="push 2 from worker rank 1 after 0 pushes"):
        push(server, 1, 2, gradients(1.0))


def test_done_is_acknowledged_and_the_server_finishes_when_every_worker_is_done():
    server, outbox = make_server(paradigms.ASP(2))
    server.handle(exchange.wire.Message(exchange.wire.Kind.DONE, 1))
    assert [(d, m.kind) for d, m in outbox.take()] == [(1, exchange.wire.Kind.BYE)]
    assert not server.finished
    server.handle(exchange.wire.Message(exchange.wire.Kind.LOST, 1, reason="gone after done"))  # normal: it finished
    server.handle(exchange.wire.Message(exchange.wire.Kind.DONE, 2))
    assert server.finished


def test_losing_a_worker_that_has_not_finished_fails_the_server_naming_it():
    server, _ = make_server(paradigms.BSP(2), averages_rounds=True)
    with pytest.raises(exchange.server.ServerError, match="lost worker rank 2 before it finished: socket closed"):
        server.handle(exchange.wire.Message(exchange.wire.Kind.LOST, 2, reason="socket closed"))


def test_silence_names_the_workers_that_owe_a_message_not_those_held():
    server, _ = make_server(paradigms.BSP(2), averages_rounds=True)
    push(server, 1, 1, gradients(1.0))  # worker 1 is held for worker 2
    inbox: queue.Queue = queue.Queue()
    with pytest.raises(exchange.server.ServerError, match=r"waiting on worker rank\(s\) 2,"):
        exchange.server.run(server, inbox, timeout_seconds=0.05, record=lambda step, metrics: None)


# ---------------------------------------------------------------------------------------------
# Shards and bytes


def test_shards_are_whole_tensors_balanced_by_bytes_and_the_same_on_every_rank():
    sizes = [400, 100, 300, 200, 250]
    owner_of = exchange.shards.assign(sizes, 2)
    assert owner_of == exchange.shards.assign(list(sizes), 2)
    loads = [sum(s for s, o in zip(sizes, owner_of) if o == j) for j in range(2)]
    assert sorted(loads) == [600, 650]
    assert exchange.shards.assign(sizes, 1) == [0] * 5


def test_a_plan_cuts_any_list_in_model_order():
    parameters = [torch.zeros(10), torch.zeros(1000), torch.zeros(100), torch.zeros(990)]
    plan = exchange.shards.Plan.of(parameters, 2)
    # Largest first: 4000 B -> 0, 3960 -> 1, 400 -> 1 (the lighter), 40 -> 0; loads 4040 and 4360.
    assert plan.tensors == [[0, 1], [2, 3]]
    assert plan.shard(1, ["a", "b", "c", "d"]) == ["c", "d"]


def test_a_layout_packs_mixed_dtypes_at_aligned_offsets_and_views_them_back_without_copying():
    tensors = [torch.arange(3, dtype=torch.float16), torch.arange(5, dtype=torch.float64).view(5, 1),
               torch.tensor([7], dtype=torch.int64), torch.randn(2, 3)]
    layout = exchange.wire.Layout(tensors)
    assert all(offset % exchange.wire.ALIGNMENT == 0 for offset in layout.offsets)
    buffer = layout.pack(tensors[:3] + [None])
    views = layout.views(buffer)
    for original, view in zip(tensors[:3], views):
        assert view.dtype == original.dtype and torch.equal(view, original)
    assert torch.equal(views[3], torch.zeros(2, 3))
    views[2].fill_(9)
    assert layout.views(buffer)[2].item() == 9


def test_a_header_carries_every_field_exactly():
    message = exchange.wire.Message(exchange.wire.Kind.REPLY, 5, count=2**40 + 1, clock=17, held=0.125, version=99,
                              payload=torch.zeros(24, dtype=torch.uint8))
    decoded, payload_bytes = exchange.wire.decode_header(exchange.wire.encode_header(message))
    assert (decoded.kind, decoded.sender, decoded.count, decoded.clock, decoded.held, decoded.version) == \
        (exchange.wire.Kind.REPLY, 5, 2**40 + 1, 17, 0.125, 99)
    assert payload_bytes == 24 and message.wire_bytes == exchange.wire.HEADER_BYTES + 24


# ---------------------------------------------------------------------------------------------
# The emulated receiving NIC


def test_messages_arriving_together_share_the_ingress_bandwidth_one_after_another():
    ingress = exchange.link.Ingress(shaping.Shaper(8_000_000))  # 1 MB/s: 20 kB take 20 ms
    started = time.perf_counter()
    threads = [threading.Thread(target=ingress.arrive, args=(20_000, started)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert time.perf_counter() - started >= 0.040  # two transfers of 20 ms each, not side by side


def test_an_unshaped_ingress_never_waits():
    ingress = exchange.link.Ingress(shaping.Shaper(None))
    started = time.perf_counter()
    ingress.arrive(10**9, started)  # 1 GB: shaped at any real NIC's rate this would take seconds
    assert time.perf_counter() - started < 1.0  # room for a loaded machine's scheduling, none for a wait

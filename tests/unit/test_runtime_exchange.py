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
from ringleader.api import variants
from ringleader.contract import keys
from ringleader.runtime import compression, exchange, models, nic, optimizers, paradigms

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


def make_server(gate: paradigms.Gate, momentum: float = 0.0):
    outbox = Outbox()
    shard = [torch.ones(2, 2), torch.zeros(3)]
    server = exchange.server.ShardServer(
        rank=SERVER, shard=shard, workers=WORKERS, gate=gate, link=outbox,
        optimizer_factory=optimizers.factory(spec_.Optimizer(learningRate=LEARNING_RATE, momentum=momentum)),
    )
    return server, outbox


def push(server, worker: int, count: int, gradients: list[torch.Tensor], at: float = 0.0):
    payload = server.layout.pack(gradients)
    message = exchange.wire.Message(exchange.wire.MessageKind.PUSH, worker, count=count, payload=payload,
                                    received_at=at)
    return server.handle(message)


def weights_of(server, message: exchange.wire.Message) -> list[torch.Tensor]:
    return server.layout.views(message.payload)


def gradients(value: float) -> list[torch.Tensor]:
    return [torch.full((2, 2), value), torch.full((3,), value)]


# ---------------------------------------------------------------------------------------------
# Aggregation


def test_a_compressing_server_takes_16_bit_pushes_and_answers_in_16_bits_counting_what_it_saved():
    outbox, codec = Outbox(), compression.MessageCodec(variants.CompressionMethod.FP16)
    server = exchange.server.ShardServer(
        rank=SERVER, shard=[torch.ones(2, 2), torch.zeros(3)], workers=WORKERS, gate=paradigms.BSP(2), link=outbox,
        optimizer_factory=optimizers.factory(spec_.Optimizer(learningRate=LEARNING_RATE)), codec=codec)
    for worker, value in zip(WORKERS, (1e-5, 3e-5)):  # below FP16's normal range: the per-tensor scale keeps them
        payload = codec.pack(server.layout, gradients(value), server.layout.empty())
        server.handle(exchange.wire.Message(exchange.wire.MessageKind.PUSH, worker, count=1, payload=payload))
    [(_, reply), _] = outbox.take()
    weights = codec.unpack(server.layout, reply.payload)
    assert torch.allclose(weights[0], torch.full((2, 2), 1.0 - LEARNING_RATE * 2e-5), rtol=2.0 ** -11, atol=0)
    assert torch.allclose(server.parameters[1].detach(), torch.full((3,), -LEARNING_RATE * 2e-5), rtol=1e-3)
    assert reply.uncompressed == exchange.wire.Layout(server.parameters).nbytes
    assert reply.payload_bytes < reply.uncompressed and reply.uncompressed_bytes - reply.wire_bytes == 32 - 24


def test_bsp_averages_the_round_and_releases_everyone_with_the_same_weights():
    server, outbox = make_server(paradigms.BSP(2))
    assert push(server, 1, 1, gradients(1.0)) is None  # half a round: nothing applied, nobody answered
    assert outbox.take() == []
    metrics = push(server, 2, 1, gradients(3.0))
    replies = outbox.take()
    assert [destination for destination, _ in replies] == [1, 2]
    expected = 1.0 - LEARNING_RATE * 2.0  # the mean gradient is 2
    for _, reply in replies:
        assert reply.kind == exchange.wire.MessageKind.REPLY and reply.clock == 1 and reply.version == 1
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
    server.handle(exchange.wire.Message(exchange.wire.MessageKind.PULL, 1, count=0, received_at=0.0))
    server.handle(exchange.wire.Message(exchange.wire.MessageKind.PULL, 2, count=0, received_at=0.0))
    push(server, 2, 1, gradients(1.0), at=3.0)  # the slow worker: one interval of 3 s
    metrics = push(server, 1, 1, gradients(1.0), at=1.0)  # 0 ahead: OK, no controller
    assert keys.SERVER_THRESHOLD not in metrics
    metrics = push(server, 1, 2, gradients(1.0), at=2.0)  # 1 ahead of s_L = 0 -> controller
    assert gate.last_grant is not None
    assert metrics[keys.SERVER_THRESHOLD] == gate.last_grant.threshold
    assert 0 <= metrics[keys.SERVER_THRESHOLD] <= 3


# ---------------------------------------------------------------------------------------------
# Pulls, done, failures


def test_a_dssp_follower_holds_a_worker_past_s_lower_until_owner_0s_grant_is_relayed():
    server, outbox = make_server(paradigms.DSSPFollower(2, lower=0, upper=3))
    push(server, 1, 1, gradients(1.0))
    assert outbox.take() == [], "worker 1 is one ahead of worker 2, past s_L = 0: only a grant lets it go"
    server.handle(exchange.wire.Message(exchange.wire.MessageKind.GRANT, 1, count=1, grant=2))
    (destination, reply), = outbox.take()
    assert destination == 1 and reply.clock == 0 and reply.grant == 2
    push(server, 1, 2, gradients(1.0))  # the second push of the grant: unchecked
    assert [d for d, _ in outbox.take()] == [1]
    push(server, 1, 3, gradients(1.0))  # past the grant, three ahead: held again
    assert outbox.take() == []
    assert server.held == [1]


def test_a_grant_relayed_to_a_gate_that_never_grants_is_a_protocol_error():
    server, _ = make_server(paradigms.SSP(2, staleness=1))
    with pytest.raises(paradigms.ProtocolError, match="only DSSP grants"):
        server.handle(exchange.wire.Message(exchange.wire.MessageKind.GRANT, 1, count=1, grant=2))


def test_owner_0s_dssp_reply_carries_the_grant_its_controller_made():
    gate = paradigms.DSSP(2, lower=0, upper=3)
    server, outbox = make_server(gate)
    server.handle(exchange.wire.Message(exchange.wire.MessageKind.PULL, 1, count=0, received_at=0.0))
    server.handle(exchange.wire.Message(exchange.wire.MessageKind.PULL, 2, count=0, received_at=0.0))
    outbox.take()
    push(server, 2, 1, gradients(1.0), at=3.0)  # the slow worker: one interval of 3 s
    push(server, 1, 1, gradients(1.0), at=1.0)
    assert [reply.grant for _, reply in outbox.take()] == [0, 0], "no grant within s_L"
    push(server, 1, 2, gradients(1.0), at=2.0)  # 1 ahead of s_L = 0: the controller decides
    # Worker 1 pushes every 1 s from t=2, worker 2 every 3 s from t=6: r = 3 brings them closest (5 vs 6).
    (destination, reply), = outbox.take()
    assert destination == 1 and gate.last_grant.extra == 3
    assert reply.grant == 2 + 3  # this push and r more go unchecked


def test_the_initial_pulls_are_answered_together_once_every_worker_asked_so_all_start_at_once():
    server, outbox = make_server(paradigms.ASP(2))
    server.handle(exchange.wire.Message(exchange.wire.MessageKind.PULL, 2, count=0, clock=0, received_at=1.0))
    assert outbox.take() == []  # worker 1 is still starting: worker 2 would run ahead of it under ASP
    server.handle(exchange.wire.Message(exchange.wire.MessageKind.PULL, 1, count=0, clock=0, received_at=3.0))
    replies = outbox.take()
    assert [destination for destination, _ in replies] == [2, 1]
    assert all(torch.equal(weights_of(server, reply)[0], torch.ones(2, 2)) for _, reply in replies)
    assert server.gate.pushed_at == [(3.0, 3.0), (3.0, 3.0)]  # both first intervals start when they were answered


def test_pushes_must_arrive_in_order():
    server, _ = make_server(paradigms.ASP(2))
    with pytest.raises(exchange.server.ServerError, match="push 2 from worker rank 1 after 0 pushes"):
        push(server, 1, 2, gradients(1.0))


def test_done_is_acknowledged_and_the_server_finishes_when_every_worker_is_done():
    server, outbox = make_server(paradigms.ASP(2))
    server.handle(exchange.wire.Message(exchange.wire.MessageKind.DONE, 1))
    assert [(d, m.kind) for d, m in outbox.take()] == [(1, exchange.wire.MessageKind.BYE)]
    assert not server.finished
    # normal: it finished
    server.handle(exchange.wire.Message(exchange.wire.MessageKind.LOST, 1, reason="gone after done"))
    server.handle(exchange.wire.Message(exchange.wire.MessageKind.DONE, 2))
    assert server.finished


def test_a_stop_reaches_every_worker_in_its_next_answer_without_holding_anyone():
    server, outbox = make_server(paradigms.ASP(2))
    push(server, 2, 1, gradients(1.0))
    assert [reply.stop for _, reply in outbox.take()] == [False]
    server.handle(exchange.wire.Message(exchange.wire.MessageKind.STOP, 1, count=1))  # worker 1 reached the target
    push(server, 2, 2, gradients(1.0))
    assert [(d, reply.stop) for d, reply in outbox.take()] == [(2, True)]  # answered at once, told to stop


def test_bsp_completes_the_round_without_a_worker_that_stopped_and_averages_the_others():
    server, outbox = make_server(paradigms.BSP(2))
    push(server, 1, 1, gradients(1.0))
    push(server, 2, 1, gradients(1.0))
    outbox.take()
    push(server, 2, 2, gradients(4.0))  # worker 1 stopped after 1 iteration: worker 2 is held for its push
    assert outbox.take() == []
    server.handle(exchange.wire.Message(exchange.wire.MessageKind.STOP, 1, count=1))
    metrics = server.handle(exchange.wire.Message(exchange.wire.MessageKind.DONE, 1, count=1))
    sent = outbox.take()
    assert [(d, m.kind) for d, m in sent] == [(1, exchange.wire.MessageKind.BYE), (2, exchange.wire.MessageKind.REPLY)]
    reply = sent[1][1]
    assert reply.stop and reply.version == 2 and reply.clock == 2  # the round of worker 2 alone, applied
    expected = 1.0 - LEARNING_RATE * 1.0 - LEARNING_RATE * 4.0  # round 1's mean 1, then worker 2's 4 alone
    assert torch.allclose(weights_of(server, reply)[0], torch.full((2, 2), expected))
    assert metrics is not None and metrics[keys.SERVER_QUEUE_DEPTH] == 0.0


def test_ssp_frees_a_worker_held_for_one_that_stopped():
    server, outbox = make_server(paradigms.SSP(2, staleness=0))
    push(server, 1, 1, gradients(1.0))
    push(server, 2, 1, gradients(1.0))
    outbox.take()
    push(server, 2, 2, gradients(1.0))  # one ahead of worker 1: held
    assert outbox.take() == []
    server.handle(exchange.wire.Message(exchange.wire.MessageKind.DONE, 1, count=1))
    assert [(d, m.kind) for d, m in outbox.take()] == [(1, exchange.wire.MessageKind.BYE),
                                                       (2, exchange.wire.MessageKind.REPLY)]


def test_losing_a_worker_that_has_not_finished_fails_the_server_naming_it():
    server, _ = make_server(paradigms.BSP(2))
    with pytest.raises(exchange.server.ServerError, match="lost worker rank 2 before it finished: socket closed"):
        server.handle(exchange.wire.Message(exchange.wire.MessageKind.LOST, 2, reason="socket closed"))


def test_silence_names_the_workers_that_owe_a_message_not_those_held():
    server, _ = make_server(paradigms.BSP(2))
    push(server, 1, 1, gradients(1.0))  # worker 1 is held for worker 2
    inbox = exchange.link.Delivery(nic.EmulatedNic(None))
    with pytest.raises(exchange.server.ServerError, match=r"waiting on worker rank\(s\) 2,"):
        exchange.server.run(server, inbox, timeout_seconds=0.05, record=lambda step, metrics: None)


# ---------------------------------------------------------------------------------------------
# Shards and bytes


def shard_bytes(parameters: list[torch.Tensor], owners: int) -> list[int]:
    plan = exchange.shards.Partition.of(parameters, owners)
    return [plan.nbytes(j, parameters) for j in range(owners)]


def quickstart_mlp() -> torch.nn.Module:
    spec = spec_.ExperimentSpec.model_validate({"architecture": "PeerToPeer", "workers": {"replicas": 2},
                                                "model": {"name": "mlp"}})
    return models.build(spec.model, spec.data.synthetic)


UNEQUAL = [torch.zeros(10), torch.zeros(1_000_003), torch.zeros(3, dtype=torch.float64), torch.zeros(7, 11),
           torch.zeros(40_000, dtype=torch.float16), torch.zeros(1)]


@pytest.mark.parametrize("owners", [1, 2, 3, 4, 7, 8])
@pytest.mark.parametrize("which", ["quickstart mlp", "very unequal layers"])
def test_every_owner_gets_the_same_bytes_within_one_element_whatever_the_layer_sizes(which, owners):
    parameters = exchange.shards.trainable(quickstart_mlp()) if which == "quickstart mlp" else UNEQUAL
    sizes = [p.numel() * p.element_size() for p in parameters]
    assert max(sizes) > 0.5 * sum(sizes), "the point: one tensor is most of the model"
    loads = shard_bytes(parameters, owners)
    assert sum(loads) == sum(sizes)
    widest = max(p.element_size() for p in parameters)
    assert max(loads) - min(loads) <= widest, loads  # one element's rounding, not one tensor's


def test_pieces_cover_every_element_once_in_model_order_and_the_same_on_every_rank():
    numels = [p.numel() for p in UNEQUAL]
    plan = exchange.shards.Partition.of(UNEQUAL, 4)
    assert plan == exchange.shards.Partition.of([p.clone() for p in UNEQUAL], 4)
    flat = [(piece.tensor, piece.start, piece.stop) for pieces in plan.pieces for piece in pieces]
    assert flat[0][:2] == (0, 0)
    for (tensor, _, stop), (next_tensor, next_start, _) in zip(flat, flat[1:]):
        # Each piece picks up where the one before stopped: within a tensor, or at the next tensor's start.
        assert (next_tensor, next_start) in ((tensor, stop), (tensor + 1, 0))
        assert next_tensor != tensor + 1 or stop == numels[tensor]
    assert flat[-1][0] == len(numels) - 1 and flat[-1][2] == numels[-1]
    assert sum(stop - start for _, start, stop in flat) == sum(numels)
    assert {piece.tensor for piece in plan.pieces[1]} == {1}, "the million-element tensor is split across owners"


def test_more_owners_than_elements_leave_some_owners_empty():
    assert exchange.shards.cut([2], [4], 4) == [[exchange.shards.Piece(0, 0, 1)], [],
                                               [exchange.shards.Piece(0, 1, 2)], []]


def test_a_shard_is_a_set_of_flat_views_writing_through_to_the_parameters():
    parameters = [torch.zeros(3, 4), torch.zeros(5)]
    plan = exchange.shards.Partition.of(parameters, 2)  # 17 elements: the cut at 8.5 rounds up, owner 0 gets 9
    assert [(p.tensor, p.start, p.stop) for p in plan.pieces[1]] == [(0, 9, 12), (1, 0, 5)]
    for piece in plan.shard(1, parameters):
        piece.fill_(1.0)
    assert parameters[0].reshape(-1).tolist() == [0.0] * 9 + [1.0] * 3 and parameters[1].tolist() == [1.0] * 5
    assert plan.shard(1, [None, torch.ones(5)])[0] is None  # a parameter without a gradient


def test_a_non_contiguous_parameter_is_refused_with_what_to_change():
    with pytest.raises(ValueError, match=r"parameter 1 \(shape \(3, 2\)\) is not contiguous"):
        exchange.shards.Partition.of([torch.zeros(4), torch.zeros(2, 3).t()], 2)


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


def test_a_frame_carries_every_header_field_exactly_and_its_payload_in_a_larger_receive_buffer():
    payload = torch.arange(24, dtype=torch.uint8)
    message = exchange.wire.Message(exchange.wire.MessageKind.REPLY, 5, count=2**40 + 1, clock=17, held=0.125,
                                    version=99, grant=12, stop=True, sent_at=1_790_000_000.123456, lead=0.0075,
                                    payload=payload)
    frame = exchange.wire.encode(message)
    assert frame.numel() == message.wire_bytes == exchange.wire.HEADER_BYTES + 24
    received = exchange.wire.empty_frame(1000)  # a receiver's buffer for the largest frame it can get
    received[:frame.numel()] = frame
    received[frame.numel():] = 255  # whatever the buffer held past the frame must not be read
    decoded = exchange.wire.decode(received)
    assert (decoded.kind, decoded.sender, decoded.count, decoded.clock, decoded.held, decoded.version, decoded.grant,
            decoded.stop, decoded.sent_at, decoded.lead) == (exchange.wire.MessageKind.REPLY, 5, 2**40 + 1, 17, 0.125,
                                                             99, 12, True, 1_790_000_000.123456, 0.0075)
    assert torch.equal(decoded.payload, payload)
    payload.fill_(7)  # the sender reuses its buffer while the frame is in flight: the frame has its own copy
    assert torch.equal(exchange.wire.decode(frame).payload, torch.arange(24, dtype=torch.uint8))


def test_a_message_without_payload_is_a_header_alone():
    frame = exchange.wire.encode(exchange.wire.Message(exchange.wire.MessageKind.DONE, 3, count=40))
    decoded = exchange.wire.decode(exchange.wire.empty_frame(0).copy_(frame))
    assert frame.numel() == exchange.wire.HEADER_BYTES and decoded.payload is None and decoded.count == 40


def test_a_frame_larger_than_the_receive_buffer_is_refused():
    frame = exchange.wire.encode(exchange.wire.Message(exchange.wire.MessageKind.PUSH, 1,
                                                       payload=torch.zeros(64, dtype=torch.uint8)))
    with pytest.raises(ValueError, match="in a buffer of"):
        exchange.wire.decode(frame[:exchange.wire.HEADER_BYTES + 8])


# ---------------------------------------------------------------------------------------------
# The emulated receiving NIC, and each reader's delivery


def shaped_nic() -> nic.EmulatedNic:
    return nic.EmulatedNic(8_000_000)  # 1 MB/s: 20 kB take 20 ms


def arrive(delivery: exchange.link.Delivery, sender: int, sent_at: float, seen: float, lead: float = 0.0,
           nbytes: int = 20_000) -> exchange.wire.Message:
    """A frame from `sender` as a receiver thread hands it on: its turn reserved on the card, put for its reader."""
    message = exchange.wire.Message(exchange.wire.MessageKind.PUSH, sender, count=1)
    delivery.put(message, exchange.link.receiving_turn(delivery.nic, nbytes, sent_at, seen, lead))
    return message


def test_messages_arriving_together_share_the_ingress_bandwidth_one_after_another():
    card = shaped_nic()
    readers = [exchange.link.Delivery(card) for _ in range(2)]  # the server and the worker: one NIC
    started, sent_at = time.perf_counter(), time.time()
    for sender, reader in enumerate(readers):
        arrive(reader, sender, sent_at, started)
    last = max(reader.get(5).received_at for reader in readers)
    assert last - started >= 0.040  # two transfers of 20 ms each, not side by side


def test_a_message_seen_late_is_held_only_until_its_sender_started_plus_its_transfer():
    # The receiver thread ran 15 ms after the sender began; the 20 ms transfer ends 5 ms from now, not 20.
    delivery = exchange.link.Delivery(shaped_nic())
    seen = time.perf_counter()
    arrive(delivery, 1, time.time() - 0.015, seen)
    held = delivery.get(5).received_at - seen
    assert 0.004 <= held < 0.015, held


def test_a_frame_that_left_before_its_sending_turn_is_held_from_that_turn():
    # The frame was handed to gloo at once, but its sender's NIC was busy for 15 ms more (lead): its 20 ms
    # on this side start then, not when it was seen.
    delivery = exchange.link.Delivery(shaped_nic())
    seen = time.perf_counter()
    arrive(delivery, 1, time.time() + 0.015, seen, lead=0.015)
    held = delivery.get(5).received_at - seen
    assert 0.034 <= held < 1.0, held


def test_a_frame_seen_early_for_a_later_turn_does_not_hold_back_one_whose_turn_began_first():
    # X is seen first but its sending turn begins in 30 ms; Y, seen 5 ms later while the reader already sleeps
    # on X, began now: Y takes the receiving NIC first (20 ms), then X (at 30 ms, until 50 ms). Taken in the
    # order seen, Y would wait until 70.
    delivery = exchange.link.Delivery(shaped_nic())
    began, wall = time.perf_counter(), time.time()
    x = arrive(delivery, 1, wall + 0.030, began, lead=0.030)
    later = threading.Timer(0.005, lambda: arrive(delivery, 2, wall, time.perf_counter()))
    later.start()
    first, second = delivery.get(5), delivery.get(5)
    later.join(5)
    assert first is not x and second is x
    assert 0.019 <= first.received_at - began < 0.065, first.received_at - began  # 70 ms if taken in the order seen
    assert second.received_at - began >= 0.049, second.received_at - began


def test_a_senders_messages_reach_its_reader_in_the_order_sent_whatever_their_turns_say():
    # Turns computed from two clocks (sent_at, seen + lead) need not grow with each frame of one sender.
    delivery = exchange.link.Delivery(shaped_nic())
    seen, wall = time.perf_counter(), time.time()
    first = arrive(delivery, 1, wall + 0.010, seen, lead=0.010)
    second = arrive(delivery, 1, wall - 0.010, seen)
    assert [delivery.get(5), delivery.get(5)] == [first, second]


def test_a_message_of_this_rank_is_read_at_once_not_behind_a_frame_still_crossing():
    # A peer's own push to its own shard server crosses no NIC; news of a lost peer comes after its frames.
    delivery = exchange.link.Delivery(shaped_nic())
    began = time.perf_counter()
    crossing = arrive(delivery, 1, time.time(), began)  # in 20 ms
    own = exchange.wire.Message(exchange.wire.MessageKind.PUSH, 0, count=1)
    delivery.put(own)
    delivery.put(exchange.wire.Message(exchange.wire.MessageKind.LOST, 1, reason="socket closed"))
    assert delivery.get(5) is own and own.received_at - began < 0.015
    assert delivery.get(5) is crossing and crossing.received_at - began >= 0.019
    assert delivery.get(5).kind == exchange.wire.MessageKind.LOST


def test_a_sender_clock_ahead_of_ours_never_shortens_the_transfer():
    # A sent_at in our future (another host's clock running ahead) counts from when the message was seen.
    delivery = exchange.link.Delivery(shaped_nic())
    seen = time.perf_counter()
    arrive(delivery, 1, time.time() + 5.0, seen)
    held = delivery.get(5).received_at - seen
    assert 0.019 <= held < 1.0, held


def test_an_unshaped_ingress_never_waits():
    delivery = exchange.link.Delivery(nic.EmulatedNic(None))
    started = time.perf_counter()
    # 1 GB: shaped at any real NIC's rate this would take seconds
    arrive(delivery, 1, time.time(), started, nbytes=10**9)
    assert delivery.get(5).received_at - started < 1.0  # room for a loaded machine's scheduling, none for a wait


def test_a_reader_with_nothing_to_read_hears_so_after_its_timeout():
    delivery = exchange.link.Delivery(shaped_nic())
    with pytest.raises(queue.Empty):
        delivery.get(0.05)

"""PeerToPeer under BSP on real ranks: every peer is its own shard's barrier, with no central gate on the data path.

Three peers, the third ten times slower. Each fast peer's trace shows, per iteration, when each
owner's shard came back, how long that owner held it (`held`, measured by the owner) and its clock.
With one gate on peer 0, the other owners answered pulls without holding anyone; here every owner
holds the fast peers until the straggler's gradient of the round reaches it, then answers at once.
"""

from __future__ import annotations

import statistics

import pytest

from ringleader.runtime import exchange, models

pytestmark = [pytest.mark.integration, pytest.mark.timing]

PEERS = 3


@pytest.fixture(scope="module")
def bsp_run(make_trial, module_run_trial, tmp_path_factory):
    trial = make_trial({
        "architecture": "PeerToPeer", "sync": {"paradigm": "BSP"},
        "workers": {"replicas": PEERS, "groups": [{"name": "fast", "replicas": 2},
                                                  {"name": "slow", "replicas": 1, "slowdownPercent": 1000}]},
        "model": {"name": "mlp", "batchSize": 512, "iterations": 12, "warmupIterations": 2},
    }, name="p2p-barriers-0")
    run = module_run_trial(trial, tmp_path_factory.mktemp("p2p-barriers"), timeout=120)
    assert run.ok, run.explain()
    return run


def shard_spans(run, rank: int) -> dict[int, dict[int, dict]]:
    """step -> owner index -> the args of the "shard j" span of that step, from the rank's trace."""
    events = run.read_json(rank, "trace.json")["traceEvents"]
    iterations = sorted((e["ts"], e["ts"] + e["dur"], int(e["name"].split()[1])) for e in events
                        if e.get("name", "").startswith("iteration "))
    spans: dict[int, dict[int, dict]] = {}
    for event in events:
        if event.get("ph") == "X" and event.get("name", "").startswith("shard "):
            step = next(s for begin, end, s in iterations if begin <= event["ts"] <= end)
            spans.setdefault(step, {})[int(event["name"].split()[1])] = event["args"]
    return spans


def ranks(run, group: str) -> list[int]:
    return [s.rank for s in run.trial.worker_slots() if s.group == group]


def test_every_owner_holds_the_fast_peers_until_the_straggler_s_gradient_reaches_it(bsp_run):
    for rank in ranks(bsp_run, "fast"):
        spans = shard_spans(bsp_run, rank)
        assert len(spans) >= 8, spans.keys()
        for owner in range(PEERS):
            held = statistics.median(spans[step][owner]["held"] for step in spans)
            # The straggler computes ~10x as long (a sleep, so a busy machine slows the fast peers, not it): about
            # 60 ms behind each round, far past the noise of tests running beside it. One central gate would leave 0.
            assert held > 0.002, f"peer {rank}: owner {owner} held it {held * 1e3:.2f} ms (median)"


def test_every_owner_answers_each_round_with_all_its_gradients_in(bsp_run):
    for rank in ranks(bsp_run, "fast") + ranks(bsp_run, "slow"):
        for step, by_owner in shard_spans(bsp_run, rank).items():
            assert sorted(by_owner) == list(range(PEERS))
            assert {args["clock"] for args in by_owner.values()} == {step + 1}, (rank, step, by_owner)


def test_each_peer_sends_and_receives_exactly_its_pushes_and_replies_and_all_peers_alike(bsp_run):
    """Per iteration, peer i sends N-1 gradient shards and N-1 copies of its own shard, and nothing else
    (no pulls, no gate messages); equal shards make every peer's traffic the same within a few bytes."""
    trial = bsp_run.trial
    parameters = exchange.shards.trainable(models.build(trial.spec.model, trial.spec.data.synthetic))
    plan = exchange.shards.Partition.of(parameters, PEERS)
    message = [exchange.wire.Layout(plan.shard(j, parameters)).nbytes + exchange.wire.HEADER_BYTES
               for j in range(PEERS)]
    sent = {}
    for index, slot in enumerate(trial.worker_slots()):
        records = [r for r in bsp_run.iterations(slot.rank) if not r["warmup"]]
        expected = sum(message[j] for j in range(PEERS) if j != index) + (PEERS - 1) * message[index]
        sent[slot.rank] = statistics.median(r["bytes/sent"] for r in records)
        assert sent[slot.rank] == expected
        assert statistics.median(r["bytes/received"] for r in records) == expected
    assert max(sent.values()) - min(sent.values()) <= 2 * (PEERS - 1) * exchange.wire.ALIGNMENT

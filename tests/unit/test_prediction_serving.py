"""A prediction's serving work and shared cores (models/prediction_serving.py), against values worked out by hand."""

from __future__ import annotations

import dataclasses

import pytest

from ringleader.models import calibration, cost_models, overlap, prediction, prediction_models
from ringleader.models import prediction_serving as serving
from ringleader.models import profile as profile_
from ringleader.api.variants import Architecture, Paradigm
from ringleader.contract import keys

PS, P2P, RING = Architecture.PARAMETER_SERVER, Architecture.PEER_TO_PEER, Architecture.RING_ALL_REDUCE


def record(step: int, role: str = "worker", warmup: bool = False, **fields: float) -> dict:
    return {"step": step, "role": role, "warmup": warmup, **fields}


def test_serving_is_measured_by_the_server_or_the_peers_else_taken_from_the_update():
    # A server's aggregation: 9 ms at warm-up, then 2 and 4 ms (median 3): the whole model served in 3 ms.
    server = [record(0, "ps", True, **{keys.SERVER_AGGREGATION: 0.009}),
              record(1, "ps", **{keys.SERVER_AGGREGATION: 0.002}),
              record(2, "ps", **{keys.SERVER_AGGREGATION: 0.004})]
    measured = serving.serving(PS, {0: server, 1: [record(1, **{keys.TIME_UPDATE: 0.5})]}, workers=2, servers=1)
    assert measured.model_seconds == pytest.approx(0.003) and "server" in measured.source
    # Peers serve a shard each: the slowest peer's median (1.5 ms) times the 2 peers.
    peers = {0: [record(1, **{keys.SERVER_AGGREGATION: 0.001})], 1: [record(1, **{keys.SERVER_AGGREGATION: 0.0015})]}
    assert serving.serving(P2P, peers, workers=2, servers=1).model_seconds == pytest.approx(0.003)
    # A ring has no server: (N+1) times the workers' median update (1 ms), unpacking each push about a pass like it.
    ring = {r: [record(1, **{keys.TIME_UPDATE: 0.001}), record(2, warmup=True, **{keys.TIME_UPDATE: 0.9})]
            for r in (0, 1)}
    estimated = serving.serving(RING, ring, workers=2, servers=1)
    assert estimated.model_seconds == pytest.approx(0.003) and "update" in estimated.source
    assert serving.serving(RING, {0: [record(1)]}, workers=2, servers=1) == serving.Serving()


def test_a_server_serves_its_share_a_peer_its_shard_and_a_ring_nothing():
    whole = serving.Serving(0.012, "by hand")
    assert whole.seconds(PS, workers=3, servers=1) == pytest.approx(0.012)
    assert whole.seconds(PS, workers=3, servers=4) == pytest.approx(0.003)
    assert whole.seconds(P2P, workers=3) == pytest.approx(0.004)
    assert whole.seconds(RING, workers=3) == 0.0


def test_cores_count_the_most_crowded_machines_workers_and_threads_per_cpu_and_the_busiest_machines_load():
    usage = {"0": {keys.HOST: "a", keys.CPUS: 2, keys.THREADS: 1, keys.LOAD_PER_CPU: 0.8},  # the server
             "1": {keys.HOST: "a", keys.CPUS: 2, keys.THREADS: 2}, "2": {keys.HOST: "a", keys.CPUS: 2, keys.THREADS: 1},
             "3": {keys.HOST: "b", keys.CPUS: 4, keys.THREADS: 1, keys.LOAD_PER_CPU: 1.7}}
    found = serving.cores(usage, worker_ranks=[1, 2, 3])
    assert found == serving.Cores(workers_per_cpu=1.0, threads_per_cpu=2.0, load_per_cpu=1.7)
    del usage["0"][keys.LOAD_PER_CPU], usage["3"][keys.LOAD_PER_CPU]  # recorded before ranks measured the load
    assert serving.cores(usage, worker_ranks=[1, 2, 3]).load_per_cpu is None
    assert (serving.cores(None, [1]) == serving.Cores()
            and serving.cores({"0": {keys.HOST: "a"}}, [0]) == serving.Cores())
    # Workers that compute at once wait for each other's cores; a parameter server's workers compute staggered.
    crowded = serving.Cores(workers_per_cpu=1.5)
    assert crowded.factor(RING) == crowded.factor(P2P) == 1.5 and crowded.factor(PS) == 1.0
    assert serving.Cores(workers_per_cpu=0.5).factor(RING) == 1.0


def pod(name: str, node: str, quota: float, node_cpus: float | None) -> dict:
    used = {keys.HOST: name, keys.NODE: node, keys.CPUS: quota, keys.THREADS: 1}
    return used | ({keys.MACHINE_CPUS: node_cpus} if node_cpus else {})


def test_the_machine_is_the_node_its_pods_share_whatever_each_pods_quota():
    """Three pods of 150m, two of them on one 2-CPU node: that node has 1 worker per CPU, not 6.7 per pod."""
    usage = {"0": pod("w-0", "n1", 0.15, 2.0), "1": pod("w-1", "n1", 0.15, 2.0), "2": pod("w-2", "n2", 0.15, 2.0)}
    from ringleader.models import contention

    assert sorted(contention.ranks_by_machine(usage)) == ["n1", "n2"]
    assert serving.cores(usage, worker_ranks=[0, 1, 2]).workers_per_cpu == pytest.approx(1.0)  # n1: 2 on 2 CPUs
    assert [m.cpus for m in contention.machines(usage)] == [2.0, 2.0]
    # An older runtime's records say nothing of the node's CPUs: each pod stays its own machine, as it was read.
    old = {rank: {k: v for k, v in used.items() if k != keys.MACHINE_CPUS} for rank, used in usage.items()}
    assert len(contention.ranks_by_machine(old)) == 3
    assert serving.cores(old, worker_ranks=[0, 1, 2]).workers_per_cpu == pytest.approx(1 / 0.15)


def test_compute_moves_between_architectures_by_the_cores_they_share_and_a_crowded_peers_own_serving():
    compute = profile_.Compute({0: {1: 0.006, 2: 0.009}})
    whole, crowded = serving.Serving(0.003, "by hand"), serving.Cores(workers_per_cpu=1.5)
    assert serving.moved(compute, whole, crowded, 3, RING, RING) is compute
    assert serving.moved(compute, whole, crowded, 3, None, P2P) is compute  # the trial's architecture unknown
    # From 1PS (staggered, 1x) to the ring (1.5x): 9 and 13.5 ms; to P2P also the peer's own serving, 3 ms / 3.
    assert serving.moved(compute, whole, crowded, 3, PS, RING).by_rank[0] == pytest.approx({1: 0.009, 2: 0.0135})
    assert serving.moved(compute, whole, crowded, 3, PS, P2P).by_rank[0] == pytest.approx({1: 0.010, 2: 0.0145})
    # And back: P2P's 10 ms less its serving (1 ms), over 1.5: 6 ms under a parameter server.
    assert serving.moved(profile_.Compute({0: {1: 0.010}}), whole, crowded, 3, P2P, PS).by_rank[0][1] == \
        pytest.approx(0.006)
    # Uncrowded, only the architecture's serving differs: nothing moves.
    assert serving.moved(compute, whole, serving.Cores(1.0), 3, PS, P2P).by_rank == compute.by_rank


def test_the_estimates_add_the_serving_on_the_path_and_move_the_compute():
    # 3 workers on 2 CPUs measured under a parameter server: 10 ms of compute, serving the model 6 ms.
    link = calibration.Calibration(cost_models.Nic(8e6, 0.0005), cost_models.CommCost(0.001, 1e-6), 3,
                                   calibration.EMULATED, "by hand")
    gradients = (profile_.Gradient("L", 6000, 0.001),)
    inputs = prediction_models.Inputs(profile_.Profile(gradients, 0.001),
                                      profile_.Compute({r: {1: 0.010} for r in (1, 2, 3)}),
                               link, 3, Paradigm.BSP, overlap.RuntimeBuckets(1e6, 1e6), None, PS,
                               serving.Serving(0.006, "by hand"), serving.Cores(workers_per_cpu=1.5))
    found = {e.label: e for e in prediction.estimates(inputs)}
    assert found["1ps"].serving_seconds == pytest.approx(0.006)
    assert found["1ps"].compute_seconds == pytest.approx(0.010 + 0.006)
    assert found["4ps"].serving_seconds == pytest.approx(0.0015)
    assert found["p2p"].serving_seconds == pytest.approx(0.002)
    assert found["p2p"].compute_seconds == pytest.approx(0.010 * 1.5 + 0.002 + 0.002)  # shared cores, its own server
    assert found["ring"].serving_seconds == 0.0
    # Without the trial's architecture, the compute is taken as it is and only serving is added.
    plain = {e.label: e for e in prediction.estimates(dataclasses.replace(inputs, architecture=None))}
    assert plain["p2p"].compute_seconds == pytest.approx(0.010 + 0.002)

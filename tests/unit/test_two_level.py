"""Two levels: k ranks to a pod, P pods. What each architecture sends inside and across pods (models/cross_node.py),
what that costs on a link inside and a NIC between (models/cost_models.py), and the predictions built on both
(models/prediction.py), worked out by hand; with one rank per pod, every two-level model is its flat one."""

from __future__ import annotations

import dataclasses

import pytest

from ringleader.models import architectures, calibration, cost_models, cross_node, overlap, prediction, whatif
from ringleader.models import prediction_models
from ringleader.api import spec as spec_
from ringleader.api import variants
from ringleader.api import trial as trial_
from ringleader.contract import levels

from test_models_prediction import COMPUTE, PROFILE

M = 1_000_000.0


def a_trial(architecture: str, workers: int, ranks_per_pod: int, servers: int = 1) -> trial_.Trial:
    spec = spec_.ExperimentSpec.model_validate({
        "architecture": architecture, "workers": {"replicas": workers, "ranksPerPod": ranks_per_pod},
        "parameterServers": {"replicas": servers}})
    return trial_.Trial(experiment="e", name="e-0", index=0, spec=spec)


def sent(architecture: str, workers: int, k: int, nodes=None, servers: int = 1) -> dict[int, dict[str, float]]:
    trial = a_trial(architecture, workers, k, servers)
    return cross_node.modelled_bytes(trial, levels.Levels.of(trial, nodes), M)


def across_pods(by_level: dict[str, float]) -> float:
    return by_level[levels.NODE] + by_level[levels.NETWORK]


@pytest.mark.parametrize("k, pods", [(2, 2), (2, 3), (4, 2), (3, 3)])
def test_a_hierarchical_ring_rank_sends_2_k_minus_1_over_k_inside_and_2_p_minus_1_over_p_of_m_over_k_across(k, pods):
    # Reduce-scatter and allgather inside the pod: (k-1)/k of M each; across, the allreduce of its M/k chunk among
    # the P ranks of its local index: 2(P-1)/P of M/k.
    for rank, by_level in sent("HierarchicalRingAllReduce", k * pods, k).items():
        assert by_level[levels.POD] == pytest.approx(2 * (k - 1) / k * M), rank
        assert across_pods(by_level) == pytest.approx(2 * (pods - 1) / pods * M / k), rank


@pytest.mark.parametrize("k, pods", [(2, 2), (2, 3), (4, 2), (3, 3)])
def test_the_flat_ring_sends_more_across_pods_by_kp_minus_1_over_k_p_minus_1(k, pods):
    n = k * pods
    flat, hierarchical = sent("RingAllReduce", n, k), sent("HierarchicalRingAllReduce", n, k)
    # Ranks in pod order: one hop per pod crosses, carrying the ring's 2(N-1)/N * M; the others stay inside.
    crossing = [rank for rank, by_level in flat.items() if across_pods(by_level)]
    assert crossing == [pod * k + k - 1 for pod in range(pods)]
    assert all(across_pods(flat[rank]) == pytest.approx(2 * (n - 1) / n * M) for rank in crossing)
    ratio = sum(map(across_pods, flat.values())) / sum(map(across_pods, hierarchical.values()))
    assert ratio == pytest.approx((k * pods - 1) / (k * (pods - 1)))


def test_across_pods_is_across_nodes_only_where_the_pods_are_on_two_nodes():
    by_level = sent("HierarchicalRingAllReduce", 6, 2, nodes={0: "a", 1: "a", 2: "a", 3: "a", 4: "b", 5: "b"})
    # Pods 0 and 1 on node a, pod 2 on node b: the inter-pod ring of each index goes 0 -> 1 (node) -> 2 (network) -> 0.
    assert by_level[0][levels.NODE] == pytest.approx(2 * 2 / 3 * M / 2) and by_level[0][levels.NETWORK] == 0.0
    assert by_level[2][levels.NETWORK] == pytest.approx(2 * 2 / 3 * M / 2) and by_level[2][levels.NODE] == 0.0
    assert by_level[4][levels.NETWORK] == pytest.approx(2 * 2 / 3 * M / 2)


def test_pod_aggregation_makes_the_servers_hear_one_push_per_pod():
    flat, aggregated = sent("ParameterServer", 4, 2), sent("ParameterServerPodAggregation", 4, 2)
    assert flat[0][levels.NODE] == pytest.approx(4 * M)  # the server's replies: one per worker
    assert aggregated[0][levels.NODE] == pytest.approx(2 * M)  # one per pod
    # a pod's first: the weights out, the push
    assert aggregated[1] == {levels.POD: M, levels.NODE: M, levels.NETWORK: 0.0}
    assert aggregated[2] == {levels.POD: M, levels.NODE: 0.0, levels.NETWORK: 0.0}  # the other: its gradient in


@pytest.mark.parametrize("two_level, flat", [("HierarchicalRingAllReduce", "RingAllReduce"),
                                             ("ParameterServerPodAggregation", "ParameterServer")])
def test_with_one_rank_per_pod_a_two_level_architecture_sends_what_its_flat_one_does(two_level, flat):
    assert sent(two_level, 4, 1, servers=2) == sent(flat, 4, 1, servers=2)


# -- what it costs ------------------------------------------------------------------------------------------------

NIC = cost_models.Nic(8e6, 0.001)  # 1 s per MB between pods, 1 ms a message
INSIDE = cost_models.Nic(80e6, 0.0001)  # ten times faster inside a pod, 0.1 ms a message


def test_the_hierarchical_ring_costs_a_ring_inside_each_pod_and_a_ring_of_pods_through_one_nic():
    pods = cost_models.Pods(2, INSIDE)
    # Inside: 2(k-1)/k * M/B_in + 2(k-1) a_in = 0.1 + 0.0002; across: 2(P-1)/P * M/B + 2(P-1) a = 1.0 + 0.002.
    assert cost_models.hierarchical_ring_comm_seconds(4, M, NIC, pods) == pytest.approx(0.1002 + 1.002)
    # The flat ring, ranks in pod order, waits on its hops between pods: 2(N-1)/N * M/B + 2(N-1) a.
    assert cost_models.ring_comm_seconds(4, M, NIC, pods) == pytest.approx(1.5 + 0.006)
    # One pod of all four: nothing crosses a NIC; the flat ring then runs on the link inside.
    assert cost_models.ring_comm_seconds(4, M, NIC, cost_models.Pods(4, INSIDE)) == pytest.approx(0.15 + 0.0006)


def test_pod_aggregation_costs_the_gather_and_the_share_inside_and_a_parameter_server_of_p_workers():
    pods = cost_models.Pods(2, INSIDE)
    ps_of_two = cost_models.parameter_server_comm_seconds(2, M, NIC, full_duplex=True)
    assert cost_models.pod_aggregation_comm_seconds(4, M, NIC, full_duplex=True, pods=pods) == pytest.approx(
        2 * 0.1 + 2 * 0.0001 + ps_of_two)
    # The flat server, its workers' pods sharing a NIC: 2 pushes and 2 replies through each pod's.
    assert cost_models.parameter_server_comm_seconds(4, M, NIC, servers=8, pods=pods) == pytest.approx(4.0 + 0.002)


@pytest.mark.parametrize("architecture", list(variants.Architecture))
def test_with_one_rank_per_pod_each_model_is_its_flat_one(architecture):
    flat = architectures.comm_seconds(architecture, 4, M, NIC, 2)
    assert architectures.comm_seconds(architecture, 4, M, NIC, 2, cost_models.Pods(1, INSIDE)) == flat
    pairs = {variants.Architecture.HIERARCHICAL_RING_ALL_REDUCE: variants.Architecture.RING_ALL_REDUCE,
             variants.Architecture.PARAMETER_SERVER_POD_AGGREGATION: variants.Architecture.PARAMETER_SERVER}
    assert flat == pytest.approx(architectures.comm_seconds(pairs.get(architecture, architecture), 4, M, NIC, 2))


def test_the_workers_must_fill_their_pods():
    with pytest.raises(ValueError, match="multiple of the ranks per pod"):
        cost_models.hierarchical_ring_comm_seconds(3, M, NIC, cost_models.Pods(2))


# -- the predictions ----------------------------------------------------------------------------------------------

def inputs(workers: int, pods: cost_models.Pods, cap: float | None = 8e6) -> prediction_models.Inputs:
    # Between pods the probe's one way is 0.5 ms + 0.1 us per byte (80 Mbit/s) under an emulated 8 Mbit/s; the
    # allreduce of every worker 1 ms + 0.1 us per byte.
    link = calibration.Calibration(cost_models.Nic(80e6, 0.0005, cap), cost_models.CommCost(0.001, 1e-7), workers,
                                   calibration.EMULATED, "by hand")
    compute = COMPUTE if workers == 2 else dataclasses.replace(COMPUTE, by_rank={
        rank: COMPUTE.by_rank[rank % 2] for rank in range(workers)})
    return prediction_models.Inputs(PROFILE, compute, link, workers, variants.Paradigm.BSP,
                                    overlap.RuntimeBuckets(1, 1),
                             pods=pods)


def test_with_one_rank_per_pod_the_two_level_predictions_are_the_flat_ones():
    found = {e.label: e for e in prediction.estimates(inputs(2, cost_models.ONE_PER_POD))}
    assert list(found) == ["1ps", "4ps", "p2p", "ring", "hring", "1psagg", "4psagg"]
    for two_level, flat in (("hring", "ring"), ("1psagg", "1ps"), ("4psagg", "4ps")):
        assert found[two_level].iteration_seconds == pytest.approx(found[flat].iteration_seconds), two_level
        assert found[two_level].comm_seconds == pytest.approx(found[flat].comm_seconds), two_level


def test_the_hierarchical_ring_is_predicted_from_the_links_inside_and_between_pods():
    pods = cost_models.Pods(2)  # inside: the probed link without the cap, 80 Mbit/s, 0.5 ms
    found = inputs(4, pods)
    # A bucket of S bytes: the ring inside the pod, 2(k-1)/k * S/B_in + 2(k-1) a_in, then the probed allreduce of 4
    # moved to 2 pods for S/2: a = 1 ms * (P-1)/(N-1), b = 0.1 us * (P-1)/P * N/(N-1); the emulated card carries
    # 2(P-1)/P * S at 8 Mbit/s, which is longer here: 1 us per byte.
    size = 3000.0
    inside = 2 * 0.5 * size * 1e-7 + 2 * 0.0005
    moved = 0.001 / 3 + 1e-7 * 0.5 * 4 / 3 * size / 2
    assert prediction_models.hierarchical_measured_seconds(found, size) == pytest.approx(inside + moved)
    assert prediction_models.hierarchical_seconds(found, size) == pytest.approx(size * 1e-6)
    # Against the flat ring of the same pods: its buckets cost 2(N-1)/N * S on the card, 1.5 times as much.
    assert prediction_models.ring_replay(found).ends[-1] / prediction_models.hierarchical_replay(found).ends[-1] > 1.0
    estimated = {e.label: e for e in prediction.estimates(found)}
    assert estimated["hring"].model == "DAG, two levels"
    assert estimated["hring"].iteration_seconds < estimated["ring"].iteration_seconds


def test_whatif_prices_the_hierarchical_ring_inside_the_pod_on_its_link_and_across_at_the_swept_rate():
    round_ = whatif.collectives.uniform(1.0).rounds[0]
    pods = cost_models.Pods(2, INSIDE)
    # 8 workers in 4 pods at 8 Mbit/s: inside, 2(k-1)/k * 1 MB at 80 Mbit/s and 2(k-1) a_in; across, 2(P-1)/P * 1 MB.
    assert whatif.round_seconds(M, 8, 8e6, round_, pods=pods) == pytest.approx(0.1 + 0.0002 + 1.5)
    assert whatif.round_seconds(M, 8, 8e6, round_) == pytest.approx(2 * 7 / 8)  # the flat ring: 2(N-1)/N
    # the reduction arithmetic: (k-1) adds of S/k inside, (P-1) of S/N across
    added = whatif.round_seconds(M, 8, 8e6, round_, add=whatif.linear_add(1e-9), pods=pods)
    assert added - whatif.round_seconds(M, 8, 8e6, round_, pods=pods) == pytest.approx(1e-9 * (M / 2 + 3 * M / 8))
    assert (whatif.round_seconds(M, 8, 8e6, round_, pods=cost_models.ONE_PER_POD)
            == whatif.round_seconds(M, 8, 8e6, round_))

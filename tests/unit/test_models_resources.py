"""The host and the wire a byte costs per placement (models/resources.py), against values worked out by hand.

M = 8 MB of model, NICs of 500 Mbit/s (8 MB is 128 ms at that rate)."""

from __future__ import annotations

import pytest

from ringleader.api.variants import Architecture
from ringleader.models import pricing, resources
from ringleader.contract import keys

PS, P2P, RING = Architecture.PARAMETER_SERVER, Architecture.PEER_TO_PEER, Architecture.RING_ALL_REDUCE
M, B = 8e6, 500e6
SECONDS = 8 * M / B  # 0.128


def placed(server: str, *workers: str, worker_cpus: float = 1.0, server_cpus: float = 1.0) -> resources.Where:
    return resources.Where(tuple(workers), (server,), {"worker": worker_cpus, "ps": server_cpus}, B)


@pytest.mark.parametrize("workers, remote", [(("n2", "n3"), 2), (("n1", "n2"), 1), (("n2", "n3", "n2"), 3),
                                             (("n1", "n1", "n1"), 0)])
def test_one_server_shares_its_nic_among_the_workers_on_other_nodes(workers, remote):
    """1PS: 2*r*M/B for r workers on other nodes than the server's; one on the server's node costs no NIC time."""
    priced = pricing.price(PS, 1, len(workers), M, placed("n1", *workers), B, None)
    assert priced.wire_seconds == pytest.approx(2 * remote * SECONDS)
    assert priced.host_seconds is None and priced.bound == resources.WIRE  # no cpu/comm recorded: the wire alone


def test_every_rank_on_a_node_of_its_own_where_the_placement_is_unknown():
    priced = pricing.price(PS, 1, 3, M, resources.Where(nic_bits_per_second=B), B, None)
    assert priced.wire_seconds == pytest.approx(2 * 3 * SECONDS)


def test_a_ring_and_the_peers_put_each_ranks_share_through_its_nodes_nic():
    spread = placed("-", "n1", "n2", "n3")
    # Ring: 2(N-1) steps of M/N through every NIC: 2(N-1)/N * M/B.
    assert pricing.price(RING, 0, 3, M, spread, B, None).wire_seconds == pytest.approx(4 / 3 * SECONDS)
    # P2P: pushes, then replies; each phase a peer sends (N-1)/N M: 2(N-1)/N * M/B, as the ideal model.
    assert pricing.price(P2P, 0, 3, M, spread, B, None).wire_seconds == pytest.approx(4 / 3 * SECONDS)
    # Two peers of three on one node: that node's NIC carries both peers' shares to the third, and their replies.
    packed = placed("-", "n1", "n1", "n2")
    assert pricing.price(P2P, 0, 3, M, packed, B, None).wire_seconds == pytest.approx(2 * 2 / 3 * SECONDS)


def test_the_host_term_is_the_busiest_ranks_bytes_at_its_quota_and_names_the_bound():
    cost = resources.HostCost(cpu_seconds_per_byte=3e-9)  # 3 ns of CPU per byte in or out
    # 1PS of 2 workers, all on other nodes: the server moves 4M (two pushes in, two replies out).
    whole = pricing.price(PS, 1, 2, M, placed("n1", "n2", "n3"), B, cost)
    assert whole.host_seconds == pytest.approx(3e-9 * 4 * M)  # 96 ms, at a whole CPU
    assert whole.bound == resources.WIRE and whole.seconds == whole.wire_seconds  # 512 ms on the wire
    # Pods of 150m: the same CPU work takes 1/0.15 the wall time, and the host bounds it.
    quota = pricing.price(PS, 1, 2, M, placed("n1", "n2", "n3", server_cpus=0.15, worker_cpus=0.15), B, cost)
    assert quota.host_seconds == pytest.approx(3e-9 * 4 * M / 0.15)  # 640 ms
    assert quota.bound == resources.HOST and quota.seconds == quota.host_seconds
    # Packed on the server's node: no NIC time at all, the host alone.
    packed = pricing.price(PS, 1, 2, M, placed("n1", "n1", "n1", server_cpus=0.15), B, cost)
    assert packed.wire_seconds == 0.0 and packed.bound == resources.HOST
    assert packed.nic_utilization(1.0) == 0.0 and quota.nic_utilization(0.512 * 2) == pytest.approx(0.5)


def test_the_cpu_a_byte_cost_is_measured_from_the_records_less_the_update_and_absent_in_older_ones():
    def record(cpu: float | None, warmup: bool = False) -> dict:
        found = {keys.ROLE: "worker", keys.WARMUP: warmup, keys.BYTES_SENT: 1e6, keys.BYTES_RECEIVED: 1e6,
                 keys.TIME_UPDATE: 0.001}
        return found | ({keys.CPU_COMM: cpu} if cpu is not None else {})

    records = {1: [record(0.5, warmup=True), record(0.005), record(0.007)], 2: [record(0.009)]}
    assert resources.host_cost(records).cpu_seconds_per_byte == pytest.approx(0.006 / 2e6)  # median, less update
    assert resources.host_cost({1: [record(None), record(None)]}) is None


def in_pods(*nodes: str) -> resources.Where:
    """Workers two to a node (priced with pod_ranks=2: one pod per listed node)."""
    return resources.Where(tuple(node for node in nodes for _ in range(2)), ("ps-node",), {}, B)


def test_the_hierarchical_ring_sends_across_nodes_only_its_pods_share_of_each_step():
    """Pods of k=2 on P nodes: across nodes 2(P-1)/P * M/k per rank, all of a pod's ranks through its NIC at once:
    2(P-1)/P * M/B; the flat ring, its ranks in pod order, 2(kP-1)/(kP) * M/B."""
    hierarchical = pricing.price(Architecture.HIERARCHICAL_RING_ALL_REDUCE, 0, 6, M, in_pods("n1", "n2", "n3"), B,
                                   None, pod_ranks=2)
    flat = pricing.price(RING, 0, 6, M, in_pods("n1", "n2", "n3"), B, None, pod_ranks=2)
    assert hierarchical.wire_seconds == pytest.approx(4 / 3 * SECONDS)
    assert flat.wire_seconds == pytest.approx(10 / 6 * SECONDS)
    # One rank per pod: the flat ring, step for step.
    one = resources.Where(("n1", "n2", "n3"), (), {}, B)
    assert pricing.price(Architecture.HIERARCHICAL_RING_ALL_REDUCE, 0, 3, M, one, B, None) == \
        pricing.price(RING, 0, 3, M, one, B, None)


def test_pod_aggregation_pushes_once_per_pod_through_the_servers_nic():
    """1PS with per-pod aggregation: the server's NIC carries P pushes and P replies, not N; the pod's own gather and
    scatter cross no NIC."""
    aggregated = pricing.price(Architecture.PARAMETER_SERVER_POD_AGGREGATION, 1, 4, M, in_pods("n1", "n2"), B, None,
                                 pod_ranks=2)
    flat = pricing.price(PS, 1, 4, M, in_pods("n1", "n2"), B, None, pod_ranks=2)
    assert aggregated.wire_seconds == pytest.approx(2 * 2 * SECONDS)
    assert flat.wire_seconds == pytest.approx(2 * 4 * SECONDS)


@pytest.mark.parametrize("architecture, servers, where, share", [
    (PS, 1, placed("n1", "n2", "n3"), 1.0),
    (PS, 1, placed("n1", "n1", "n2"), 0.5),  # one worker's push and reply of two stay on the server's node
    (RING, 0, placed("-", "n1", "n2", "n3"), 1.0),
    (RING, 0, placed("-", "n1", "n1", "n2"), 2 / 3),  # of the ring's three links, n1 -> n1 stays inside
    (P2P, 0, placed("-", "n1", "n1", "n1"), 0.0),
])
def test_the_cross_node_share_is_the_part_of_the_bytes_whose_flow_leaves_its_node(architecture, servers, where, share):
    priced = pricing.price(architecture, servers, len(where.worker_nodes), M, where, B, None)
    assert priced.cross_node_share == pytest.approx(share)

"""Every architecture at scale from a profile and a network: the models' shape, which architecture wins where, and
what bounds each, on networks and profiles built by hand so that each expectation can be worked out on paper."""

from __future__ import annotations

import json

import pytest

from ringleader.models.profile import Gradient, Profile
from ringleader.planning import at_scale, network, profiles

MB = 1e6


def model(total_bytes: float = 100 * MB, gradients: int = 10, iteration_ms: float = 100.0, backward_ms: float = 60.0,
          batch_size: int | None = 32) -> profiles.ModelProfile:
    """`gradients` equal gradients, ready evenly through backward (the last layer's first)."""
    size, step = total_bytes / gradients, backward_ms / 1000 / gradients
    grads = tuple(Gradient(f"layer{i}", size, (gradients - i) * step) for i in range(gradients))
    return profiles.ModelProfile(Profile(grads, backward_ms / 1000), iteration_ms / 1000, (iteration_ms - backward_ms)
                                 / 2000, 0.001, batch_size, "cpu (by hand)", "by hand", {})


def level(name: str, latency_us: float, gbit: float, line_gbit: float | None = None) -> network.Level:
    """A point-to-point curve of one regime: t(S) = a + 8S/B, measured at 1 KiB to 1 GiB."""
    points = tuple((float(s), latency_us / 1e6 + 8 * s / (gbit * 1e9)) for s in (2 ** p for p in range(10, 31, 2)))
    return network.Level(name, network.Curve(network.POINT_TO_POINT, 2, points, "by hand"), None,
                         line_gbit * 1e9 if line_gbit else None)


def fabric(across_gbit: float = 10.0, inside_gbit: float = 400.0, latency_us: float = 5.0,
           line_gbit: float | None = None) -> network.MeasuredNetwork:
    return network.MeasuredNetwork(level("across nodes", latency_us, across_gbit, line_gbit),
                                   level("inside a node", 1.0, inside_gbit), "by hand")


def planned(plans, label: str, workers: int) -> at_scale.Planned:
    [found] = [p for p in plans if p.label == label and p.workers == workers]
    return found


def test_one_worker_communicates_nothing_whatever_the_architecture():
    plans = at_scale.plan(model(), fabric(), at_scale.Cluster((1,)))
    assert {p.label for p in plans} == {"1ps", "4ps", "p2p", "ring"}
    assert all(p.comm_seconds == 0 and p.efficiency == 1 and p.bound == "compute" for p in plans)


def test_one_parameter_servers_nic_carries_every_push_so_its_time_grows_with_the_workers_and_the_ring_wins():
    plans = at_scale.plan(model(), fabric(), at_scale.Cluster((8, 16, 32)))
    one_ps = [planned(plans, "1ps", n).comm_seconds for n in (8, 16, 32)]
    # 2N * 8M/B: 16, 32 and 64 transfers of 80 ms (pushes and replies in turn, as on real TCP), and 2a
    assert one_ps == pytest.approx([2 * n * 0.08 + 2 * 5e-6 for n in (8, 16, 32)], rel=1e-3)
    ring = [planned(plans, "ring", n) for n in (8, 16, 32)]
    assert all(r.iteration_seconds < planned(plans, "1ps", r.workers).iteration_seconds for r in ring)
    assert ring[0].comm_seconds < ring[2].comm_seconds < 2 * 0.08 + 0.001  # 2(N-1)/N * 8M/B at most, less hidden
    assert all(at_scale.best(plans)[n].label in ("ring", "p2p") for n in (8, 16, 32))


def test_backward_hides_the_rings_buckets_that_are_ready_early():
    long_backward = at_scale.plan(model(backward_ms=90.0, iteration_ms=100.0), fabric(across_gbit=100.0),
                                  at_scale.Cluster((8,)))
    short_backward = at_scale.plan(model(backward_ms=5.0, iteration_ms=100.0), fabric(across_gbit=100.0),
                                   at_scale.Cluster((8,)))
    assert planned(long_backward, "ring", 8).comm_seconds < planned(short_backward, "ring", 8).comm_seconds


def test_two_levels_plan_the_hierarchical_ring_and_the_pod_aggregation_which_win_on_a_slow_nic():
    plans = at_scale.plan(model(), fabric(across_gbit=10.0, inside_gbit=1000.0, latency_us=200.0),
                          at_scale.Cluster((16, 32), ranks_per_node=4))
    assert {"hring", "1psagg", "4psagg"} <= {p.label for p in plans}
    for n in (16, 32):
        # 4 pushes a node become 1: the server's NIC sees P = N/4 workers
        assert planned(plans, "1psagg", n).comm_seconds < planned(plans, "1ps", n).comm_seconds / 3
        # 2(N-1) latencies on the NIC become 2(P-1)
        assert planned(plans, "hring", n).iteration_seconds < planned(plans, "ring", n).iteration_seconds


def test_one_rank_to_a_node_leaves_the_two_level_architectures_out_they_would_be_their_flat_ones():
    plans = at_scale.plan(model(), fabric(), at_scale.Cluster((4, 8)))
    assert not {"hring", "1psagg"} & {p.label for p in plans}


def test_what_bounds_an_iteration_is_compute_the_nic_or_the_hosts_stack_by_the_rate_measured_against_the_line_rate():
    light = at_scale.plan(model(total_bytes=1000.0), fabric(), at_scale.Cluster((8,)))
    assert planned(light, "ring", 8).bound == "compute"
    at_line = at_scale.plan(model(), fabric(across_gbit=10.0, line_gbit=10.0), at_scale.Cluster((8,)))
    assert planned(at_line, "1ps", 8).bound == "NIC"
    below_line = at_scale.plan(model(), fabric(across_gbit=3.0, line_gbit=10.0), at_scale.Cluster((8,)))
    assert planned(below_line, "1ps", 8).bound == "host"
    unknown = at_scale.plan(model(), fabric(across_gbit=10.0), at_scale.Cluster((8,)))
    assert planned(unknown, "1ps", 8).bound == "network"


def test_a_ring_inside_one_node_waits_on_the_link_inside_it():
    plans = at_scale.plan(model(total_bytes=2e9), fabric(inside_gbit=10.0), at_scale.Cluster((4,), ranks_per_node=4))
    assert planned(plans, "ring", 4).bound == "inside node"


def test_throughput_and_efficiency_are_the_workers_samples_per_iteration_and_the_share_left_to_compute():
    plans = at_scale.plan(model(iteration_ms=100.0, batch_size=32), fabric(), at_scale.Cluster((8,)))
    ps = planned(plans, "1ps", 8)
    assert ps.throughput == pytest.approx(8 * 32 / ps.iteration_seconds)
    assert ps.efficiency == pytest.approx(0.1 / ps.iteration_seconds)


@pytest.mark.parametrize("cluster, message", [
    (dict(workers=(6,), ranks_per_node=4), "--workers 6: not a multiple of --ranks-per-node 4"),
    (dict(workers=(0,)), "--workers must be counts of at least 1"),
    (dict(workers=(8,), ranks_per_node=0), "--ranks-per-node must be at least 1"),
    (dict(workers=(8,), servers=(0,)), "--servers must be counts of at least 1"),
])
def test_a_cluster_that_cannot_be_is_refused_saying_the_fix(cluster, message):
    with pytest.raises(ValueError, match=message):
        at_scale.Cluster(**cluster)


def test_the_answer_names_the_fastest_at_each_worker_count_its_efficiency_and_bound():
    plans = at_scale.plan(model(), fabric(), at_scale.Cluster((8, 16)))
    lines = at_scale.answer(plans).splitlines()
    assert len(lines) == 2
    fastest = at_scale.best(plans)[8]
    assert lines[0].startswith(f"8 workers: {fastest.label} fastest") and "-bound" in lines[0] and "then " in lines[0]


def test_the_plans_document_says_it_has_no_band_and_why_what_held_where_checked_and_carries_every_row():
    plans = at_scale.plan(model(), fabric(), at_scale.Cluster((8, 16)))
    document = json.loads(json.dumps(at_scale.document(plans, model(), fabric(), at_scale.Cluster((8, 16)))))
    assert document["band"] is None and "no validated band" in document["bandNote"]
    # What held where plans were checked is carried with it, never as this cluster's band.
    assert document["checked"]["pairs"] == at_scale.CHECKED.pairs and "test cluster" in document["checked"]["where"]
    assert [row["workers"] for row in document["architectures"]["ring"]] == [8, 16]
    assert document["architectures"]["1ps"][0]["throughputUnit"] == "samples/s"


def test_with_one_level_given_a_nodes_ranks_are_priced_on_the_nics_curve_and_the_bound_says_that_curve():
    one_level = network.MeasuredNetwork(level("across nodes", 5.0, 10.0), None, "by hand")
    plans = at_scale.plan(model(total_bytes=2e9), one_level, at_scale.Cluster((4,), ranks_per_node=4))
    assert planned(plans, "ring", 4).bound == "network"


def test_a_compression_is_planned_for_the_architectures_that_take_it_with_its_rounds_bytes():
    from ringleader.api import spec

    methods = (spec.Compression(method="FP16"), spec.Compression(method="PowerSGD", rank=2),
               spec.Compression(method="TopK", ratio=0.01))
    plans = at_scale.plan(model(), fabric(), at_scale.Cluster((8,), compressions=methods))
    labels = {p.label for p in plans}
    assert {"1ps+FP16", "4ps+FP16", "p2p+FP16", "ring+FP16", "ring+PowerSGD", "ring+TopK"} <= labels
    assert not {"1ps+PowerSGD", "p2p+TopK"} & labels  # those need a ring
    # half the bytes through the server's NIC: 2N * 8(M/2)/B
    assert planned(plans, "1ps+FP16", 8).comm_seconds == pytest.approx(16 * 0.04 + 2 * 5e-6, rel=1e-3)
    assert planned(plans, "ring+FP16", 8).comm_seconds < planned(plans, "ring", 8).comm_seconds
    assert planned(plans, "ring+FP16", 8).compression == "FP16" and planned(plans, "ring", 8).compression is None
    # the fastest is told among the uncompressed: a compression's codec is not charged, so it would win on that
    assert at_scale.best(plans)[8].compression is None
    assert "before its codec's time" in at_scale.answer(plans)

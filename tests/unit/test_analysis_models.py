"""analysis/models.py against hand-computed values: study 1's cost models and study 2's DAG model."""

import pytest

from ringleader.analysis import models

# M/B = 1 second: 1e6 bytes on an 8e6 bit/s link; a = 10 ms.
M = 1e6
LINK = models.Link(bandwidth_bits_per_second=8e6, latency_seconds=0.01)


def test_one_parameter_server_carries_n_pushes_and_n_pulls():
    # 2*N*M/B + 2a = 2*4*1 + 0.02
    assert models.parameter_server_comm_seconds(4, M, LINK) == pytest.approx(8.02)
    assert models.parameter_server_comm_seconds(1, M, LINK) == pytest.approx(2.02)


def test_k_parameter_servers_share_the_load_until_the_worker_nic_is_the_limit():
    # max(2*N*M/(k*B), 2*M/B) + 2a
    assert models.parameter_server_comm_seconds(4, M, LINK, servers=2) == pytest.approx(4.02)
    assert models.parameter_server_comm_seconds(4, M, LINK, servers=8) == pytest.approx(2.02)


def test_peer_to_peer_ideal_and_single_peer():
    # 2*(N-1)*M/(N*B) + 2a = 2*3/4 + 0.02
    assert models.peer_to_peer_comm_seconds(4, M, LINK) == pytest.approx(1.52)
    assert models.peer_to_peer_comm_seconds(1, M, LINK) == 0.0


def test_ring_allreduce_latency_steps_and_bandwidth_term():
    # 2*(N-1)*a + 2*(N-1)/N * M/B = 0.06 + 1.5
    assert models.ring_comm_seconds(4, M, LINK) == pytest.approx(1.56)
    assert models.ring_comm_seconds(1, M, LINK) == 0.0


def test_ring_traffic_stays_flat_while_one_server_grows_linearly():
    bandwidth_only = models.Link(8e6)
    ring = [models.ring_comm_seconds(n, M, bandwidth_only) for n in (2, 4, 8, 64)]
    ps = [models.parameter_server_comm_seconds(n, M, bandwidth_only) for n in (2, 4, 8, 64)]
    assert ring == pytest.approx([1.0, 1.5, 1.75, 2 * 63 / 64])
    assert ps == pytest.approx([4.0, 8.0, 16.0, 128.0])


def test_comm_seconds_dispatches_on_architecture_names():
    assert models.comm_seconds("ParameterServer", 4, M, LINK, servers=2) == pytest.approx(4.02)
    assert models.comm_seconds("PeerToPeer", 4, M, LINK) == pytest.approx(1.52)
    assert models.comm_seconds(models.Architecture.RING_ALL_REDUCE, 4, M, LINK) == pytest.approx(1.56)
    with pytest.raises(ValueError):
        models.comm_seconds("Gossip", 4, M, LINK)


def test_iteration_time_only_ring_overlaps():
    assert models.iteration_seconds("RingAllReduce", 1.0, 1.5, overlap_seconds=0.5) == pytest.approx(2.0)
    assert models.iteration_seconds("RingAllReduce", 1.0, 1.5, overlap_seconds=2.0) == pytest.approx(1.0)
    assert models.iteration_seconds("ParameterServer", 1.0, 1.5, overlap_seconds=0.5) == pytest.approx(2.5)
    assert models.iteration_seconds("PeerToPeer", 1.0, 1.5) == pytest.approx(2.5)


@pytest.mark.parametrize("arguments", [(0, M, LINK), (4, -1.0, LINK)])
def test_invalid_workers_or_bytes_are_refused(arguments):
    with pytest.raises(ValueError):
        models.ring_comm_seconds(*arguments)


def test_link_refuses_a_zero_bandwidth():
    with pytest.raises(ValueError, match="bandwidth_bits_per_second must be greater than 0"):
        models.Link(0.0)


def test_dag_model_three_layers_by_hand():
    # Forward order: layer 1, 2, 3. Backward runs 3, 2, 1.
    #   tau_b = (5, 3, 0); backward ends at 6
    #   tau_c[3] = 3; tau_c[2] = max(3 + 4, 3 + 2) = 7; tau_c[1] = max(7 + 1, 5 + 1) = 8
    #   t_c_no = 8 + 2 - 6 = 4
    result = models.dag_iteration([1.0, 2.0, 3.0], [2.0, 1.0, 4.0], forward_seconds=0.5, update_seconds=0.25,
                                  io_seconds=1.0)
    assert result.backward_starts == (5.0, 3.0, 0.0)
    assert result.comm_starts == (8.0, 7.0, 3.0)
    assert result.t_c_no == pytest.approx(4.0)
    assert result.t_iter == pytest.approx(0.5 + 6.0 + 4.0 + 0.25)  # prefetched: no t_io
    unfetched = models.dag_iteration([1.0, 2.0, 3.0], [2.0, 1.0, 4.0], 0.5, 0.25, io_seconds=1.0, prefetched=False)
    assert unfetched.t_iter == pytest.approx(11.75)


def test_dag_model_hides_all_but_the_first_layers_aggregation_behind_a_long_backward():
    # tau_b = (5, 0); tau_c[2] = 5; tau_c[1] = max(5 + 1, 5 + 5) = 10; t_c_no = 10 + 1 - 10 = 1
    result = models.dag_iteration([5.0, 5.0], [1.0, 1.0])
    assert result.t_c_no == pytest.approx(1.0)
    assert result.t_iter == pytest.approx(11.0)


def test_dag_model_refuses_mismatched_layers():
    with pytest.raises(ValueError):
        models.dag_iteration([1.0, 2.0], [1.0])


def test_fit_comm_cost_least_squares():
    exact = models.fit_comm_cost([(0.0, 1.0), (10.0, 3.0), (20.0, 5.0)])
    assert exact.a_seconds == pytest.approx(1.0) and exact.b_seconds_per_byte == pytest.approx(0.2)
    # Symmetric noise around t = 1 + M: cov = 4, var = 4 -> b = 1, a = 3 - 2 = 1.
    noisy = models.fit_comm_cost([(1.0, 2.1), (1.0, 1.9), (3.0, 4.1), (3.0, 3.9)])
    assert noisy.a_seconds == pytest.approx(1.0) and noisy.b_seconds_per_byte == pytest.approx(1.0)
    assert noisy.seconds(5.0) == pytest.approx(6.0)


@pytest.mark.parametrize("samples", [[(1.0, 2.0)], [(1.0, 2.0), (1.0, 3.0)]])
def test_fit_comm_cost_needs_two_distinct_sizes(samples):
    with pytest.raises(ValueError):
        models.fit_comm_cost(samples)


def test_dag_from_bytes_uses_the_fitted_cost():
    # t_c = 1 + 0.5*M: bytes (2, 0, 6) -> (2, 1, 4), the three-layer case above.
    result = models.dag_iteration_from_bytes([1.0, 2.0, 3.0], [2.0, 0.0, 6.0], models.CommCost(1.0, 0.5))
    assert result.t_c_no == pytest.approx(4.0)

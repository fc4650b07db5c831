"""models/cost_models.py against hand-computed values: study 1's cost models, the emulated cap and the fitted cost (the
DAG model's replay: test_models_overlap.py)."""

import pytest

from ringleader.api import variants
from ringleader.models import architectures, cost_models

# M/B = 1 second: 1e6 bytes on an 8e6 bit/s link; a = 10 ms.
M = 1e6
LINK = cost_models.Nic(bandwidth_bits_per_second=8e6, latency_seconds=0.01)


def test_one_parameter_server_carries_n_pushes_and_n_pulls():
    # 2*N*M/B + 2a = 2*4*1 + 0.02
    assert cost_models.parameter_server_comm_seconds(4, M, LINK) == pytest.approx(8.02)
    assert cost_models.parameter_server_comm_seconds(1, M, LINK) == pytest.approx(2.02)


def test_k_parameter_servers_share_the_load_until_the_worker_nic_is_the_limit():
    # max(2*N*M/(k*B), 2*M/B) + 2a
    assert cost_models.parameter_server_comm_seconds(4, M, LINK, servers=2) == pytest.approx(4.02)
    assert cost_models.parameter_server_comm_seconds(4, M, LINK, servers=8) == pytest.approx(2.02)


def test_peer_to_peer_ideal_and_single_peer():
    # 2*(N-1)*M/(N*B) + 2a = 2*3/4 + 0.02
    assert cost_models.peer_to_peer_comm_seconds(4, M, LINK) == pytest.approx(1.52)
    assert cost_models.peer_to_peer_comm_seconds(1, M, LINK) == 0.0


def test_ring_allreduce_latency_steps_and_bandwidth_term():
    # 2*(N-1)*a + 2*(N-1)/N * M/B = 0.06 + 1.5
    assert cost_models.ring_comm_seconds(4, M, LINK) == pytest.approx(1.56)
    assert cost_models.ring_comm_seconds(1, M, LINK) == 0.0


def test_ring_traffic_stays_flat_while_one_server_grows_linearly():
    bandwidth_only = cost_models.Nic(8e6)
    ring = [cost_models.ring_comm_seconds(n, M, bandwidth_only) for n in (2, 4, 8, 64)]
    ps = [cost_models.parameter_server_comm_seconds(n, M, bandwidth_only) for n in (2, 4, 8, 64)]
    assert ring == pytest.approx([1.0, 1.5, 1.75, 2 * 63 / 64])
    assert ps == pytest.approx([4.0, 8.0, 16.0, 128.0])


def test_the_report_prices_communication_as_predict_does_the_servers_nic_full_duplex():
    # max((N+1)*M/(k*B), 2*M/B) + 2a = 5 + 0.02, where the textbook's 2*N*M/B counts the two directions in turn
    assert architectures.priced_comm_seconds("ParameterServer", 4, M, LINK) == pytest.approx(5.02)
    assert architectures.priced_comm_seconds("ParameterServer", 4, M, LINK) == pytest.approx(
        cost_models.parameter_server_comm_seconds(4, M, LINK, full_duplex=True))
    assert (architectures.priced_comm_seconds("PeerToPeer", 4, M, LINK)
            == architectures.comm_seconds("PeerToPeer", 4, M, LINK))
    assert (architectures.priced_comm_seconds("RingAllReduce", 4, M, LINK)
            == architectures.comm_seconds("RingAllReduce", 4, M, LINK))


def test_comm_seconds_dispatches_on_architecture_names():
    assert architectures.comm_seconds("ParameterServer", 4, M, LINK, servers=2) == pytest.approx(4.02)
    assert architectures.comm_seconds("PeerToPeer", 4, M, LINK) == pytest.approx(1.52)
    assert architectures.comm_seconds(variants.Architecture.RING_ALL_REDUCE, 4, M, LINK) == pytest.approx(1.56)
    with pytest.raises(ValueError):
        architectures.comm_seconds("Gossip", 4, M, LINK)


@pytest.mark.parametrize("arguments", [(0, M, LINK), (4, -1.0, LINK)])
def test_invalid_workers_or_bytes_are_refused(arguments):
    with pytest.raises(ValueError):
        cost_models.ring_comm_seconds(*arguments)


def test_link_refuses_a_zero_bandwidth():
    with pytest.raises(ValueError, match="bandwidth_bits_per_second must be greater than 0"):
        cost_models.Nic(0.0)


def test_an_emulated_cap_paces_the_bytes_and_hides_what_is_shorter():
    capped = cost_models.Nic(8e6, 0.01, cap_bits_per_second=4e6)
    assert capped.effective_bits_per_second == 4e6 and capped.transfer_seconds(M) == pytest.approx(2.0)
    # Half a megabyte per peer: paced for 1 s, longer than its 10 ms + 0.5 s on the link: the latency is hidden.
    assert capped.latency_for(M / 2) == 0.0
    assert cost_models.peer_to_peer_comm_seconds(2, M, capped) == pytest.approx(2.0)
    # 40 bytes: 80 us paced, shorter than 10 ms of latency: the latency shows.
    assert capped.latency_for(40) == 0.01 and cost_models.Nic(8e6, 0.01).latency_for(M) == 0.01
    assert cost_models.Nic(8e6, cap_bits_per_second=1e9).transfer_seconds(M) == pytest.approx(1.0)  # a faster cap: none
    with pytest.raises(ValueError, match="cap_bits_per_second must be greater than 0"):
        cost_models.Nic(8e6, cap_bits_per_second=0)


def test_fit_comm_cost_takes_the_median_slope_and_intercept():
    exact = cost_models.fit_comm_cost([(0.0, 1.0), (10.0, 3.0), (20.0, 5.0)])
    assert exact.a_seconds == pytest.approx(1.0) and exact.b_seconds_per_byte == pytest.approx(0.2)
    # Noise around t = 1 + M: slopes between sizes 1 and 3 are 1, 0.9, 1.1, 1 (median 1); t - M is 1.1, 0.9, 1.1, 0.9.
    noisy = cost_models.fit_comm_cost([(1.0, 2.1), (1.0, 1.9), (3.0, 4.1), (3.0, 3.9)])
    assert noisy.a_seconds == pytest.approx(1.0) and noisy.b_seconds_per_byte == pytest.approx(1.0)
    assert noisy.seconds(5.0) == pytest.approx(6.0)
    # One size waited for a core (t = 9 at M = 2): least squares would tilt; the median slope stays 1.
    outlier = cost_models.fit_comm_cost([(1.0, 2.0), (2.0, 9.0), (4.0, 5.0), (8.0, 9.0)])
    assert outlier.b_seconds_per_byte == pytest.approx(1.0) and outlier.a_seconds == pytest.approx(1.0)


@pytest.mark.parametrize("samples", [[(1.0, 2.0)], [(1.0, 2.0), (1.0, 3.0)]])
def test_fit_comm_cost_needs_two_distinct_sizes(samples):
    with pytest.raises(ValueError):
        cost_models.fit_comm_cost(samples)

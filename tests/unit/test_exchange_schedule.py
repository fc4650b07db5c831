"""The order of a rank's sends to many ranks (runtime/exchange/schedule.py): no two senders aim at one receiver at
once."""

import pytest

from ringleader.runtime.exchange import schedule


@pytest.mark.parametrize("peers", [[0, 1], [0, 1, 2], [0, 1, 2, 3], [0, 1, 2, 3, 4, 5, 6, 7]])
def test_peers_pushing_at_once_reach_a_different_owner_in_every_slot(peers):
    orders = {rank: [peers[j] for j in schedule.push_order(peers, rank)] for rank in peers}
    for rank, order in orders.items():
        assert sorted(order) == peers and order[-1] == rank  # every owner once; its own shard (no network) last
    for slot in range(len(peers) - 1):
        receivers = [orders[rank][slot] for rank in peers]
        assert sorted(receivers) == peers, f"slot {slot}: {receivers}"  # a permutation: no receiver hears two


@pytest.mark.parametrize("peers", [[0, 1, 2], [0, 1, 2, 3], [3, 4, 5, 6, 7]])
def test_peers_replying_at_once_reach_a_different_worker_in_every_slot(peers):
    orders = {rank: schedule.reply_order(peers, rank, peers.index(rank), len(peers)) for rank in peers}
    for rank, order in orders.items():
        assert sorted(order) == peers and order[-1] == rank  # its own worker (no network) last
    for slot in range(len(peers) - 1):
        assert sorted(orders[rank][slot] for rank in peers) == peers


def test_parameter_server_workers_start_at_different_servers_and_servers_at_different_workers():
    servers, workers = [0, 1], [2, 3, 4, 5]
    first_pushes = [servers[schedule.push_order(servers, rank)[0]] for rank in workers]
    assert first_pushes == [0, 1, 0, 1]
    first_replies = [schedule.reply_order(workers, rank, j, len(servers))[0] for j, rank in enumerate(servers)]
    assert len(set(first_replies)) == len(servers)
    assert sorted(schedule.reply_order(workers, 1, 1, 2)) == workers


def test_a_rotation_wraps_around():
    assert schedule.rotated([10, 11, 12], 2) == [12, 10, 11]
    assert schedule.rotated([10, 11, 12], 4) == [11, 12, 10]
    assert schedule.rotated([], 3) == []

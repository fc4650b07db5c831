"""Where a trial's ranks ran, from the node each recorded: ranks per node, the pairs and share of bytes that
crossed nodes by the architecture's traffic pattern, and whether two trials put the same traffic across nodes."""

from __future__ import annotations

import pytest

from ringleader.models import cross_node, summary
from ringleader.models import placement_notes
from ringleader.api import spec as spec_
from ringleader.api import trial as trial_
from ringleader.contract import keys

from test_summary import two_workers, worker_record


def make_trial(architecture="ParameterServer", workers=2, servers=1, placement=None) -> trial_.Trial:
    spec = {"architecture": architecture, "workers": {"replicas": workers}, "parameterServers": {"replicas": servers},
            "scheduling": {"placement": placement or {}}}
    return trial_.Trial(experiment="e", name="e-0", index=0, spec=spec_.ExperimentSpec.model_validate(spec))


def used_on(*nodes: str) -> dict[int, dict]:
    return {rank: {keys.HOST: f"pod-{rank}", keys.CPUS: 1.0, keys.NODE: node} for rank, node in enumerate(nodes)}


def test_each_architecture_exchanges_over_its_own_pairs():
    assert cross_node.traffic_pairs(make_trial(workers=3, servers=2)) == [
        (0, 2), (0, 3), (0, 4), (1, 2), (1, 3), (1, 4)]
    assert cross_node.traffic_pairs(make_trial("PeerToPeer", workers=3)) == [(0, 1), (0, 2), (1, 2)]
    assert cross_node.traffic_pairs(make_trial("RingAllReduce", workers=4)) == [(0, 1), (0, 3), (1, 2), (2, 3)]
    assert cross_node.traffic_pairs(make_trial("RingAllReduce", workers=2)) == [(0, 1)]
    assert cross_node.traffic_pairs(make_trial("RingAllReduce", workers=1)) == []


def test_the_summary_says_where_each_rank_ran_and_which_exchanges_crossed_nodes():
    trial = make_trial(placement={"servers": "Apart"})
    document = summary.summarize(two_workers(), trial, used_on("node-a", "node-b", "node-a")).to_document()
    assert document[keys.NODE_COUNT] == 2
    # ps-0 (rank 0) on node-a exchanges with worker 1 (node-b, across) and worker 2 (node-a, within).
    assert document[keys.CROSS_NODE_BYTE_SHARE] == pytest.approx(0.5)
    assert document[keys.PLACEMENT] == {
        "requested": "servers Apart", "nodes": {"0": "node-a", "1": "node-b", "2": "node-a"},
        "ranksPerNode": {"node-a": 2, "node-b": 1}, "crossNodePairs": [[0, 1]]}
    assert summary.to_status(document).cross_node_byte_share == 0.5 and summary.to_status(document).node_count == 2


def test_a_ring_spread_over_nodes_crosses_with_every_exchange_and_a_packed_one_with_none():
    trial = make_trial("RingAllReduce", workers=3)
    records = {rank: [worker_record(1)] for rank in range(3)}
    spread = summary.summarize(records, trial, used_on("a", "b", "c")).to_document()
    packed = summary.summarize(records, trial, used_on("a", "a", "a")).to_document()
    assert (spread[keys.NODE_COUNT], spread[keys.CROSS_NODE_BYTE_SHARE]) == (3, 1.0)
    assert (packed[keys.NODE_COUNT], packed[keys.CROSS_NODE_BYTE_SHARE]) == (1, 0.0)
    assert placement_notes.shared_node_note(spread[keys.CROSS_NODE_BYTE_SHARE]) is None
    assert "one node" in placement_notes.shared_node_note(packed[keys.CROSS_NODE_BYTE_SHARE])


def test_no_placement_is_made_up_when_a_rank_recorded_no_node():
    used = used_on("a", "b", "c")
    del used[2][keys.NODE]
    document = summary.summarize(two_workers(), make_trial(), used).to_document()
    assert not {keys.NODE_COUNT, keys.CROSS_NODE_BYTE_SHARE, keys.PLACEMENT} & set(document)
    placement = summary.TrialSummary.from_document(document).placement
    assert placement == summary.RecordedPlacement()
    assert placement_notes.describe(placement.node_count, placement.cross_node_byte_share) == ""
    assert placement_notes.shared_node_note(placement.cross_node_byte_share) is None


def test_the_per_rank_nodes_go_first_from_a_termination_message_and_the_shares_stay():
    document = summary.summarize(two_workers(), make_trial(), used_on("a", "b", "c")).to_document()
    compacted = summary.compact(document, limit=len(str(document)) // 2)
    assert keys.PLACEMENT not in compacted
    assert (compacted[keys.NODE_COUNT], compacted[keys.CROSS_NODE_BYTE_SHARE]) == (3, 1.0)


def test_two_setups_are_compared_with_a_caveat_only_when_their_shares_across_nodes_differ():
    spread, packed, alike, unplaced = (summary.TrialSummary.from_document(
        {} if share is None else {keys.NODE_COUNT: 2, keys.CROSS_NODE_BYTE_SHARE: share})
        for share in (1.0, 0.0, 0.96, None))
    assert placement_notes.caveat("a", [spread], "b", [alike]) is None
    assert placement_notes.caveat("a", [spread], "b", [unplaced]) is None  # b recorded no placement: nothing to say
    assert placement_notes.caveat("a", [spread, spread], "b", [packed, None]).startswith(
        "but they were placed differently: 100% of a's bytes crossed nodes and 0% of b's")
    assert placement_notes.describe(1, 0.0) == "1 node, 0% across"
    assert "50% of its bytes stayed within a node" in placement_notes.shared_node_note(0.5)


def test_predict_and_whatif_say_when_the_measured_link_was_a_nodes_bridge_but_not_of_a_local_run():
    packed = {keys.NODE_COUNT: 1, keys.CROSS_NODE_BYTE_SHARE: 0.0, keys.LINK_PROBE: {keys.PROBE_SHARED_HOST: False}}

    def link_note(document: dict) -> str | None:
        return placement_notes.link_note(summary.TrialSummary.from_document(document))

    assert link_note(packed) == (
        "placement: every rank ran on one node: its bytes crossed that node's bridge or loopback, not a NIC; the "
        "link measured and priced here is a bridge, not a NIC between nodes")
    half = {**packed, keys.NODE_COUNT: 2, keys.CROSS_NODE_BYTE_SHARE: 0.5}
    assert "is partly a bridge" in link_note(half)
    assert link_note({**packed, keys.CROSS_NODE_BYTE_SHARE: 1.0}) is None
    assert link_note({**packed, keys.LINK_PROBE: {keys.PROBE_SHARED_HOST: True}}) is None
    assert placement_notes.link_note(None) is None

"""A trial's placement renders as affinity over its own pods, and a packed trial asks Kueue for one domain."""

from __future__ import annotations

import pytest

from ringleader import api, topology
from ringleader.api import constants
from ringleader.topology import workload

SETTINGS = topology.RenderSettings(image="ringleader:test")
KEY = "kubernetes.io/hostname"


@pytest.fixture
def pods_of(experiment_document):
    def make(spec) -> dict[str, dict]:
        trial = api.expand(api.parse(experiment_document(spec, name="demo"))).trials[0]
        return {o["metadata"]["name"]: o for o in topology.render(trial, SETTINGS) if o["kind"] == "Pod"}
    return make


def trial_pods(**extra) -> dict[str, str]:
    return {constants.LABEL_EXPERIMENT: "demo", constants.LABEL_TRIAL: "demo-0", **extra}


def required(pod, kind) -> list[dict]:
    return pod["spec"]["affinity"][kind]["requiredDuringSchedulingIgnoredDuringExecution"]


def test_placement_any_leaves_the_pods_without_affinity(pods_of):
    for pod in pods_of({"scheduling": {"placement": {"ranks": "Any", "mode": "Preferred"}}}).values():
        assert "affinity" not in pod["spec"]


def test_spread_keeps_every_rank_off_the_domain_of_every_other_rank_of_its_trial(pods_of):
    pods = pods_of({"workers": {"replicas": 3}, "scheduling": {"placement": {
        "ranks": "Spread", "topologyKey": "topology.kubernetes.io/zone"}}})
    assert len(pods) == 4
    for pod in pods.values():
        assert set(pod["spec"]["affinity"]) == {"podAntiAffinity"}
        assert required(pod, "podAntiAffinity") == [
            {"labelSelector": {"matchLabels": trial_pods()}, "topologyKey": "topology.kubernetes.io/zone"}]


def test_servers_apart_keeps_workers_and_servers_off_each_others_domains_only(pods_of):
    pods = pods_of({"scheduling": {"placement": {"servers": "Apart"}}})
    assert required(pods["demo-0-ps-0"], "podAntiAffinity") == [
        {"labelSelector": {"matchLabels": trial_pods(**{constants.LABEL_ROLE: "worker"})}, "topologyKey": KEY}]
    for worker in ("demo-0-worker-0", "demo-0-worker-1"):
        assert set(pods[worker]["spec"]["affinity"]) == {"podAntiAffinity"}
        assert required(pods[worker], "podAntiAffinity") == [
            {"labelSelector": {"matchLabels": trial_pods(**{constants.LABEL_ROLE: "ps"})}, "topologyKey": KEY}]


def test_pack_draws_every_rank_to_the_others_and_with_servers_apart_to_its_own_role(pods_of):
    packed = pods_of({"scheduling": {"placement": {"ranks": "Pack"}}})
    for pod in packed.values():
        assert set(pod["spec"]["affinity"]) == {"podAffinity"}
        assert required(pod, "podAffinity") == [{"labelSelector": {"matchLabels": trial_pods()}, "topologyKey": KEY}]
    apart = pods_of({"scheduling": {"placement": {"ranks": "Pack", "servers": "Apart"}}})
    assert required(apart["demo-0-worker-1"], "podAffinity") == [
        {"labelSelector": {"matchLabels": trial_pods(**{constants.LABEL_ROLE: "worker"})}, "topologyKey": KEY}]
    assert required(apart["demo-0-ps-0"], "podAffinity") == [
        {"labelSelector": {"matchLabels": trial_pods(**{constants.LABEL_ROLE: "ps"})}, "topologyKey": KEY}]


def test_preferred_placement_weighs_the_same_terms_instead_of_requiring_them(pods_of):
    pod = pods_of({"architecture": "PeerToPeer", "scheduling": {"placement": {
        "ranks": "Spread", "mode": "Preferred"}}})["demo-0-worker-0"]
    assert pod["spec"]["affinity"] == {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": {"labelSelector": {"matchLabels": trial_pods()}, "topologyKey": KEY}}]}}


def queued_pod_sets(experiment_document, placement, **spec) -> list[dict]:
    document = experiment_document({"scheduling": {"queueName": "team", "placement": placement}, **spec}, name="demo")
    trial = api.expand(api.parse(document)).trials[0]
    return workload.workload(trial, topology.render(trial, SETTINGS), "team")["spec"]["podSets"]


def test_pack_asks_kueue_for_one_domain_grouping_a_single_server_with_its_workers(experiment_document):
    ps, workers = queued_pod_sets(experiment_document, {"ranks": "Pack"})
    assert (ps["count"], workers["count"]) == (1, 2)
    assert ps["topologyRequest"] == workers["topologyRequest"] == {"required": KEY, "podSetGroupName": "trial"}


def test_pack_with_servers_apart_or_several_servers_asks_a_domain_per_pod_set(experiment_document):
    for placement, servers in (({"ranks": "Pack", "servers": "Apart", "mode": "Preferred"}, 1),
                               ({"ranks": "Pack", "mode": "Preferred"}, 2)):
        sets = queued_pod_sets(experiment_document, placement, parameterServers={"replicas": servers})
        assert [s["topologyRequest"] for s in sets] == [{"preferred": KEY}, {"preferred": KEY}]


@pytest.mark.parametrize("placement", [{}, {"ranks": "Spread"}, {"servers": "Apart"}])
def test_kueue_gets_no_topology_request_where_it_cannot_express_the_placement(experiment_document, placement):
    assert all("topologyRequest" not in s for s in queued_pod_sets(experiment_document, placement))

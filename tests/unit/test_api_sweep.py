"""A sweep expands into trials in a stable order, skips (and explains) what should not run, and names trials safely."""

from __future__ import annotations

import pytest

from ringleader import api
from ringleader.api import constants
from ringleader.api import trial as trial_


def expansion(experiment_document, spec, name="demo") -> api.Expansion:
    return api.expand(api.parse(experiment_document(spec, name=name)))


def test_an_experiment_without_sweep_is_one_trial(experiment_document):
    result = expansion(experiment_document, {})
    [trial] = result.trials
    assert (trial.name, trial.index, trial.parameters, result.skipped) == ("demo-0", 0, {}, [])
    assert trial.spec.sweep is None


def test_trials_are_the_product_of_the_axes_in_declaration_order(experiment_document):
    result = expansion(experiment_document, {"sweep": {"matrix": {
        "architecture": ["ParameterServer", "PeerToPeer"], "workers": [1, 2, 4]}}})
    assert [t.parameters for t in result.trials] == [
        {"architecture": a, "workers": w} for a in ("ParameterServer", "PeerToPeer") for w in ("1", "2", "4")]
    assert [t.spec.workers.replicas for t in result.trials] == [1, 2, 4, 1, 2, 4]
    assert [t.index for t in result.trials] == list(range(6))


def test_repetitions_repeat_each_combination_in_turn(experiment_document):
    result = expansion(experiment_document, {"sweep": {"matrix": {"batchSize": [8, 16]}, "repetitions": 3}})
    assert [(t.parameters["batchSize"], t.repetition) for t in result.trials] == [
        ("8", 0), ("8", 1), ("8", 2), ("16", 0), ("16", 1), ("16", 2)]
    assert all(t.parameters["repetition"] == str(t.repetition) for t in result.trials)


def test_ring_allreduce_with_stale_paradigms_is_skipped_with_the_reason(experiment_document):
    result = expansion(experiment_document, {
        "sync": {"staleness": 3, "maxStaleness": 12},
        "sweep": {"matrix": {"architecture": ["PeerToPeer", "RingAllReduce"],
                             "paradigm": ["BSP", "ASP", "SSP", "DSSP"]}}})
    assert len(result.trials) == 5
    assert [(p["architecture"], p["paradigm"]) for p, _ in result.skipped] == [
        ("RingAllReduce", "ASP"), ("RingAllReduce", "SSP"), ("RingAllReduce", "DSSP")]
    assert result.skipped[0][1] == "RingAllReduce runs BSP only, not ASP"


def test_compression_methods_are_an_axis_and_ring_only_methods_skip_other_architectures(experiment_document):
    result = expansion(experiment_document, {"sweep": {"matrix": {
        "architecture": ["ParameterServer", "RingAllReduce"], "compression": ["None", "FP16", "PowerSGD", "TopK"]}}})
    assert [(t.spec.architecture.value, t.spec.compression.method.value) for t in result.trials] == [
        ("ParameterServer", "None"), ("ParameterServer", "FP16"),
        ("RingAllReduce", "None"), ("RingAllReduce", "FP16"), ("RingAllReduce", "PowerSGD"), ("RingAllReduce", "TopK")]
    assert [p["compression"] for p, _ in result.skipped] == ["PowerSGD", "TopK"]
    assert result.skipped[0][1] == "ParameterServer does not take compression PowerSGD (RingAllReduce only)"


def test_values_a_topology_ignores_do_not_repeat_trials(experiment_document):
    result = expansion(experiment_document, {"sweep": {"matrix": {
        "architecture": ["ParameterServer", "PeerToPeer"], "parameterServers": [1, 2, 4]}}})
    assert [(t.spec.architecture.value, t.spec.parameter_servers.replicas) for t in result.trials] == [
        ("ParameterServer", 1), ("ParameterServer", 2), ("ParameterServer", 4), ("PeerToPeer", 1)]
    assert [reason for _, reason in result.skipped] == [
        "PeerToPeer has no parameter servers: the same trial as parameterServers=1"] * 2


def test_staleness_is_swept_only_where_a_paradigm_uses_it(experiment_document):
    result = expansion(experiment_document, {"sync": {"maxStaleness": 12}, "sweep": {"matrix": {
        "paradigm": ["BSP", "SSP"], "staleness": [1, 3]}}})
    assert [(t.spec.sync.paradigm.value, t.spec.sync.staleness) for t in result.trials] == [
        ("BSP", 1), ("SSP", 1), ("SSP", 3)]
    assert result.skipped == [({"paradigm": "BSP", "staleness": "3"},
                               "BSP has no staleness bound: the same trial as staleness=1")]


def test_swept_values_replace_the_base_spec_and_keep_the_rest(experiment_document):
    result = expansion(experiment_document, {
        "model": {"name": "cnn", "iterations": 7, "warmupIterations": 1},
        "sweep": {"matrix": {"bandwidth": ["1Gbit", "10Gbit"], "model": ["mlp"]}}})
    assert [t.spec.network.bandwidth for t in result.trials] == ["1Gbit", "10Gbit"]
    assert all(t.spec.model.name == "mlp" and t.spec.model.iterations == 7 for t in result.trials)


def test_trials_are_runnable_specs_without_a_sweep(experiment_document):
    for trial in expansion(experiment_document, {"sweep": {"matrix": {"workers": [1, 2]}}}).trials:
        assert trial.spec.sweep is None
        assert api.Trial.model_validate_json(trial.model_dump_json(by_alias=True)) == trial


def test_long_experiment_names_give_bounded_unique_trial_names(experiment_document):
    name = "a-very-long-experiment-name-that-keeps-going-and-going-past-the-limit-x" * 3
    trials = expansion(experiment_document, {"sweep": {"matrix": {"workers": [1, 2, 3, 4]}}}, name=name).trials
    names = [t.name for t in trials]
    assert len(set(names)) == 4
    assert all(len(n) <= trial_.MAX_TRIAL_NAME for n in names)
    assert all(n.startswith("a-very-long-experiment") for n in names)


@pytest.mark.parametrize("experiment, expected_prefix", [
    ("study.v2", "study-v2-"),   # dots are not allowed in Service names
    ("2024-run", "dte-2024-run-"),  # nor a leading digit
])
def test_trial_names_are_dns_1035_labels(experiment, expected_prefix):
    name = trial_.trial_name(experiment, 0)
    assert name.startswith(expected_prefix) and name.endswith("-0")
    assert name[0].isalpha() and "." not in name and len(name) <= trial_.MAX_TRIAL_NAME


def test_names_that_sanitize_alike_stay_distinct():
    assert trial_.trial_name("a.b", 0) != trial_.trial_name("a-b", 0)
    assert trial_.trial_name("a-b", 0) == "a-b-0"


def test_slots_put_parameter_servers_first_and_number_ranks_in_order(experiment_document):
    [trial] = expansion(experiment_document, {"parameterServers": {"replicas": 2}, "workers": {"replicas": 3}}).trials
    assert [(s.role, s.index, s.rank) for s in trial.slots()] == [
        ("ps", 0, 0), ("ps", 1, 1), ("worker", 0, 2), ("worker", 1, 3), ("worker", 2, 4)]
    assert trial.world_size == 5


def test_worker_groups_give_slots_their_placement_and_speed(experiment_document):
    [trial] = expansion(experiment_document, {
        "architecture": "RingAllReduce",
        "scheduling": {"nodeSelector": {"pool": "train"}},
        "workers": {"replicas": 3, "resources": {"cpu": "2"}, "groups": [
            {"name": "fast", "replicas": 2},
            {"name": "slow", "replicas": 1, "slowdownPercent": 300, "nodeSelector": {"zone": "b"},
             "resources": {"cpu": "500m"}}]}}).trials
    slots = trial.slots()
    assert [s.hostname for s in slots] == ["worker-0", "worker-1", "worker-2"]
    assert [s.group for s in slots] == ["fast", "fast", "slow"]
    assert [s.resources.cpu for s in slots] == ["2", "2", "500m"]
    assert slots[2].slowdown_percent == 300 and slots[0].slowdown_percent == 100
    assert slots[2].node_selector == {"pool": "train", "zone": "b"}
    assert slots[0].node_selector == {"pool": "train"}
    assert all(s.role == constants.ROLE_WORKER for s in slots)


def test_placement_is_an_axis_named_by_its_label(experiment_document):
    result = expansion(experiment_document, {"sweep": {"matrix": {
        "placement": [{"ranks": "Spread"}, {"ranks": "Pack", "mode": "Preferred"}, {}]}}})
    assert [t.parameters for t in result.trials] == [
        {"placement": "Spread"}, {"placement": "Pack, Preferred"}, {"placement": "Any"}]
    assert [t.spec.scheduling.placement.ranks.value for t in result.trials] == ["Spread", "Pack", "Any"]
    assert result.trials[1].spec.scheduling.placement.mode == api.spec.PlacementMode.PREFERRED


def test_servers_apart_is_skipped_where_there_are_no_servers(experiment_document):
    result = expansion(experiment_document, {"sweep": {"matrix": {
        "architecture": ["ParameterServer", "RingAllReduce"],
        "placement": [{"ranks": "Spread"}, {"servers": "Apart"}]}}})
    assert [t.parameters for t in result.trials] == [
        {"architecture": "ParameterServer", "placement": "Spread"},
        {"architecture": "ParameterServer", "placement": "servers Apart"},
        {"architecture": "RingAllReduce", "placement": "Spread"}]
    assert result.skipped == [({"architecture": "RingAllReduce", "placement": "servers Apart"},
                               "RingAllReduce has no parameter servers to keep Apart")]


def test_a_placement_label_names_what_differs_from_the_default():
    placement = api.spec.Placement
    assert placement().label() == "Any"
    assert placement(ranks="Pack", servers="Apart").label() == "Pack, servers Apart"
    assert placement(servers="Apart", mode="Preferred", topology_key="topology.kubernetes.io/zone").label() == (
        "servers Apart, Preferred by topology.kubernetes.io/zone")

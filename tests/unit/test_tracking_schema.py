"""The MLflow schema's pure parts: params from a trial and a sweep, run names."""

from __future__ import annotations

from ringleader.api import experiment, trial
from ringleader.tracking import schema


def expand(spec: dict, name: str = "params") -> list[trial.Trial]:
    return trial.expand(experiment.parse({
        "apiVersion": "ringleader.dev/v1alpha1", "kind": "DistributedTrainingExperiment",
        "metadata": {"name": name, "namespace": "lab"}, "spec": spec,
    })).trials


def a_trial() -> trial.Trial:
    return expand({"architecture": "PeerToPeer", "sync": {"paradigm": "DSSP", "staleness": 2, "maxStaleness": 6},
                   "workers": {"replicas": 3, "groups": [{"name": "fast", "replicas": 2},
                                                         {"name": "slow", "replicas": 1, "slowdownPercent": 300}]},
                   "sweep": {"matrix": {"batchSize": [16, 32]}, "repetitions": 2}})[3]


def test_trial_params_are_the_resolved_spec_in_dotted_camelcase_plus_the_trials_identity():
    params = schema.trial_params(a_trial())
    assert params["architecture"] == "PeerToPeer"
    assert params["sync.maxStaleness"] == "6"
    assert params["model.batchSize"] == "32"  # the swept value, resolved
    assert params["workers.groups.1.slowdownPercent"] == "300"
    assert params["scheduling.gang"] == "Operator"
    assert params["trial.name"] == "params-3" and params["trial.repetition"] == "1"
    assert params["trial.parameters.batchSize"] == "32" and params["trial.parameters.repetition"] == "1"
    assert not any(key.startswith("sweep") for key in params)
    assert all(len(value) <= schema.MAX_PARAM_VALUE for value in params.values())


def test_trial_params_leave_out_placeholders():
    params = schema.trial_params(a_trial())
    assert not [key for key, value in params.items() if value in ("", "{}", "[]", "None")]
    assert not any(key.startswith(("scheduling.tolerations", "scheduling.nodeSelector")) for key in params)
    assert "network.bandwidth" not in params


def test_trial_params_leave_out_what_the_trial_does_not_use():
    ring, server, stale = expand({"architecture": "RingAllReduce", "sync": {"staleness": 2},
                                  "model": {"optimizer": {"name": "Adam"}},
                                  "sweep": {"matrix": {"architecture": ["RingAllReduce", "ParameterServer"],
                                                       "paradigm": ["BSP", "SSP"]}}})
    assert (ring.spec.architecture.value, server.spec.sync.paradigm.value) == ("RingAllReduce", "BSP")
    ring_params, server_params, stale_params = map(schema.trial_params, (ring, server, stale))
    assert not any(key.startswith("parameterServers") for key in ring_params)
    assert server_params["parameterServers.replicas"] == "1"
    assert "sync.staleness" not in ring_params and "sync.staleness" not in server_params  # BSP
    assert stale_params["sync.staleness"] == "2" and "sync.maxStaleness" not in stale_params  # SSP
    assert "model.optimizer.momentum" not in ring_params  # Adam
    assert "data.synthetic.sequenceLength" not in ring_params and "data.synthetic.imageSize" in ring_params
    assert not any(key.startswith("compression") for key in ring_params)  # method None: a placeholder
    power, top = map(schema.trial_params, expand({"architecture": "RingAllReduce", "sweep": {"matrix": {
        "compression": ["PowerSGD", "TopK"]}}}))
    assert (power["compression.method"], power["compression.rank"], power["compression.errorFeedback"]) == (
        "PowerSGD", "2", "true") and "compression.ratio" not in power
    assert (top["compression.ratio"], "compression.rank" in top) == ("0.01", False)
    transformer = schema.trial_params(expand({"model": {"name": "transformer"}})[0])
    assert "data.synthetic.imageSize" not in transformer and "data.synthetic.sequenceLength" in transformer


def test_sweep_params_list_each_axis_values_instead_of_the_base_value_they_replace():
    source = experiment.parse({
        "apiVersion": "ringleader.dev/v1alpha1", "kind": "DistributedTrainingExperiment",
        "metadata": {"name": "study"},
        "spec": {"sync": {"staleness": 3}, "network": {"bandwidth": "1Gbit"},
                 "sweep": {"matrix": {"architecture": ["ParameterServer", "PeerToPeer", "RingAllReduce"],
                                      "bandwidth": ["100Mbit", "1Gbit"]}, "repetitions": 2}}})
    params = schema.sweep_params(source)
    assert params["sweep.architecture"] == "ParameterServer, PeerToPeer, RingAllReduce"
    assert params["sweep.bandwidth"] == "100Mbit, 1Gbit" and params["sweep.repetitions"] == "2"
    assert "architecture" not in params and "network.bandwidth" not in params
    assert params["parameterServers.replicas"] == "1"  # the ParameterServer trials use it
    assert "sync.staleness" not in params  # every trial runs BSP
    assert not [key for key, value in params.items() if value in ("", "{}", "[]", "None")]


def test_the_trial_run_name_carries_every_swept_value():
    assert schema.trial_run_name(a_trial()) == "params-3 (PeerToPeer, DSSP, 3 workers, batch 32, repetition 1)"
    bandwidth = expand({"architecture": "RingAllReduce", "workers": {"replicas": 4},
                        "sweep": {"matrix": {"bandwidth": ["10Mbit", "100Mbit"]}, "repetitions": 2}}, "study-3")
    assert [schema.trial_run_name(t) for t in bandwidth] == [
        "study-3-0 (RingAllReduce, BSP, 4 workers, bandwidth 10Mbit, repetition 0)",
        "study-3-1 (RingAllReduce, BSP, 4 workers, bandwidth 10Mbit, repetition 1)",
        "study-3-2 (RingAllReduce, BSP, 4 workers, bandwidth 100Mbit, repetition 0)",
        "study-3-3 (RingAllReduce, BSP, 4 workers, bandwidth 100Mbit, repetition 1)"]
    assert len({schema.trial_run_name(t) for t in bandwidth}) == len(bandwidth)


def test_one_worker_is_singular_and_unswept_values_stay_out_of_the_name():
    alone = expand({"workers": {"replicas": 1}, "parameterServers": {"replicas": 2},
                    "sweep": {"matrix": {"parameterServers": [1, 2], "staleness": [1]}}})
    assert [schema.trial_run_name(t) for t in alone] == ["params-0 (ParameterServer, BSP, 1 worker, 1 server)",
                                                         "params-1 (ParameterServer, BSP, 1 worker, 2 servers)"]


def test_rank_runs_are_named_with_their_trial_and_from_a_second_attempt_on_with_their_attempt():
    assert schema.rank_run_name("study-3-2", 1, "worker") == "study-3-2/rank-1 (worker)"
    assert schema.rank_tags("study-3-2", 0, "ps", "abc")[schema.TAG_RUN_NAME] == "study-3-2/rank-0 (ps)"
    first, second = (schema.rank_tags("study-3-2", 1, "worker", "abc", attempt=a) for a in (1, 2))
    assert (first[schema.TAG_ATTEMPT], second[schema.TAG_ATTEMPT]) == ("1", "2")
    assert second[schema.TAG_RUN_NAME] == "study-3-2/rank-1 (worker, attempt 2)"


def test_a_rank_run_names_where_it_ran_its_node_its_pod_and_its_place_in_the_pod():
    tags = schema.rank_tags("study-3-2", 3, "worker", "abc", node="node-2", pod="worker-1", local_rank=1)
    assert (tags[schema.TAG_NODE], tags[schema.TAG_POD], tags[schema.TAG_LOCAL_RANK]) == ("node-2", "worker-1", "1")
    assert schema.TAG_NODE not in schema.rank_tags("study-3-2", 0, "ps", "abc")  # known later, from its summary


def test_ui_links_open_the_model_training_view():
    assert schema.ui_url("http://127.0.0.1:5000/", "4", "abc") == \
        "http://127.0.0.1:5000/#/experiments/4/runs/abc?workflowType=machine_learning"
    assert (schema.ui_url("https://mlflow.example", "4")
            == "https://mlflow.example/#/experiments/4?workflowType=machine_learning")
    assert schema.ui_url("http://127.0.0.1:5000", "4", "abc", "report/report.html") == \
        "http://127.0.0.1:5000/#/experiments/4/runs/abc/artifacts/report/report.html?workflowType=machine_learning"


def test_flatten_leaves_empty_containers_and_nulls_out():
    assert schema.flatten({"a": {}, "b": [], "c": {"d": [1, {"e": None}], "f": ""}, "g": False}) == \
        {"c.d.0": "1", "g": "false"}


def test_trial_params_say_who_enforces_a_cap_and_nothing_without_one():
    emulated, enforced = expand({"network": {"enforcement": "Network"},
                                 "sweep": {"matrix": {"bandwidth": ["100Mbit", "1Gbit"]}}})
    assert ((enforced.spec.network.bandwidth, schema.trial_params(enforced)["network.enforcement"])
            == ("1Gbit", "Network"))
    assert schema.trial_params(emulated)["network.bandwidth"] == "100Mbit"
    assert schema.trial_params(expand({"network": {"bandwidth": "1Gbit"}})[0])["network.enforcement"] == "Emulated"
    # Uncapped, "Emulated" (the default) would read as if something were emulated.
    assert "network.enforcement" not in schema.trial_params(expand({})[0])

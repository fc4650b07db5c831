"""The MLflow schema's pure parts: params from a trial, metrics from records."""

from __future__ import annotations

from ringleader.api import experiment, trial
from ringleader.tracking import schema


def a_trial() -> trial.Trial:
    return trial.expand(experiment.parse({
        "apiVersion": "ringleader.dev/v1alpha1", "kind": "DistributedTrainingExperiment",
        "metadata": {"name": "params", "namespace": "lab"},
        "spec": {"architecture": "PeerToPeer", "sync": {"paradigm": "DSSP", "staleness": 2, "maxStaleness": 6},
                 "workers": {"replicas": 3, "groups": [{"name": "fast", "replicas": 2},
                                                       {"name": "slow", "replicas": 1, "slowdownPercent": 300}]},
                 "sweep": {"matrix": {"batchSize": [16, 32]}, "repetitions": 2}},
    })).trials[3]


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


def test_the_trial_run_name_says_what_tells_trials_apart():
    assert schema.trial_run_name(a_trial()) == "params-3 (PeerToPeer, DSSP, 3 workers, repetition 1)"


def test_record_metrics_keep_finite_numbers_and_drop_indexes_labels_and_flags():
    record = {"step": 4, "role": "worker", "warmup": True, "time/comm": 0.5, "staleness": 2, "loss": float("nan"),
              "bytes/sent": 10, "note": "x", "timestamp": 1.7e9}
    assert schema.record_metrics(record) == {"time/comm": 0.5, "staleness": 2.0, "bytes/sent": 10.0}


def test_nested_summaries_become_dotted_metric_names():
    assert schema.numeric_items({"throughput": 3, "extras": {"scalingEfficiency": 0.8, "ranks": [1, 2]},
                                 "stragglerRank": None}) == {"throughput": 3.0, "extras.scalingEfficiency": 0.8}


def test_flatten_keeps_empty_containers_visible():
    assert schema.flatten({"a": {}, "b": [], "c": {"d": [1, {"e": None}]}}) == \
        {"a": "{}", "b": "[]", "c.d.0": "1", "c.d.1.e": ""}

"""The API server refuses invalid experiments with the CRD's CEL messages (the same ones `ringleader validate`
prints)."""

from __future__ import annotations

import pytest

import e2e_specs

CASES = {
    "ring-with-ssp": (
        {"architecture": "RingAllReduce", "sync": {"paradigm": "SSP", "staleness": 2}},
        "`sync.paradigm` must be BSP when `architecture` is RingAllReduce: allreduce is a collective in which every "
        "worker waits for all; use ParameterServer or PeerToPeer for ASP, SSP or DSSP"),
    "dssp-without-max-staleness": (
        {"sync": {"paradigm": "DSSP", "staleness": 3}},
        "`sync.maxStaleness` is required when `sync.paradigm` is DSSP: set it to the upper bound s_U of the "
        "threshold (e.g. staleness 3, maxStaleness 12)"),
    "groups-not-adding-up": (
        {"workers": {"replicas": 3, "groups": [{"name": "normal", "replicas": 1},
                                               {"name": "straggler", "replicas": 1, "slowdownPercent": 300}]}},
        "`workers.groups` replicas must add up to `workers.replicas`: change a group's replicas or workers.replicas "
        "so that the sums match"),
    "max-staleness-not-above-staleness": (
        {"sync": {"paradigm": "DSSP", "staleness": 3, "maxStaleness": 2}},
        "`sync.maxStaleness` must be greater than `sync.staleness`: DSSP moves its threshold between the two; raise "
        "maxStaleness or lower staleness"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_api_server_refuses_an_invalid_experiment_with_the_cel_message(kube, namespace, case):
    spec, message = CASES[case]
    manifest = e2e_specs.experiment(f"invalid-{case}", namespace, **spec)
    result = kube.apply(manifest, check=False)
    assert result.returncode != 0, f"the API server accepted {case}: {result.stdout}"
    assert "is invalid" in result.stderr and message in result.stderr, result.stderr
    assert kube.dte(namespace, f"invalid-{case}") is None

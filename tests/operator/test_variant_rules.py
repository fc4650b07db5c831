"""Apiserver tier: the CEL the variant tables generate (api/variants.py, api/rules.py) refuses what pydantic refuses.

Each spec goes to a real API server and to `ringleader validate`'s parser: both take it, or both refuse it
with the same message (paradigms a collective does not run, compression methods an architecture does not take,
staleness fields a paradigm requires), on single trials and on sweeps that keep or lose every valid combination.
"""

import pytest

import experiments as dtes
from ringleader import api

REFUSED = {"ring-ssp", "sweep-ring-only-ssp", "p2p-powersgd", "dssp-without-max"}
CASES = {
    "ring-ssp": dict(architecture="RingAllReduce", sync={"paradigm": "SSP", "staleness": 2}),
    "sweep-ring-only-ssp": dict(sync={"staleness": 2}, sweep={"matrix": {"architecture": ["RingAllReduce"],
                                                                         "paradigm": ["SSP", "ASP"]}}),
    "sweep-ring-and-ps-ssp": dict(sync={"staleness": 2}, sweep={"matrix": {
        "architecture": ["RingAllReduce", "ParameterServer"], "paradigm": ["SSP"]}}),
    "p2p-powersgd": dict(architecture="PeerToPeer", compression={"method": "PowerSGD"}),
    "sweep-ps-ring-topk": dict(compression={"method": "TopK"}, sweep={"matrix": {
        "architecture": ["ParameterServer", "RingAllReduce"]}}),
    "p2p-sweep-powersgd-fp16": dict(architecture="PeerToPeer", sweep={"matrix": {"compression": ["PowerSGD", "FP16"]}}),
    "dssp-without-max": dict(sync={"paradigm": "DSSP", "staleness": 2}),
}


@pytest.mark.parametrize("case", CASES)
def test_the_api_server_and_validate_agree_on_the_variant_rules(admin, namespace, case):
    document = dtes.experiment(case, namespace, **CASES[case])
    try:
        api.parse(document)
        refused = []
    except api.SpecError as error:
        refused = [problem.message for problem in error.problems]
    assert bool(refused) == (case in REFUSED), refused
    response = admin.session.post(admin.url + admin.path("DistributedTrainingExperiment", namespace), json=document,
                                  timeout=30)
    if not refused:
        assert response.status_code == 201, response.text
        return
    assert response.status_code == 422, response.text
    assert all(message in response.json()["message"] for message in refused), (refused, response.json()["message"])

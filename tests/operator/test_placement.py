"""Apiserver tier (no kubelet: the test writes pod status): a trial's placement, as the API server and operator see it.

The API server takes a placement sweep and refuses servers Apart where there are no servers, with the rule's
message; a pod its Required placement keeps off every node makes the trial wait with a Warning Event naming the
placement, then fail at the startup deadline with reason PlacementUnsatisfiable.
"""

import experiments as dtes
from apiserver_client import wait_for

UNMET = "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules."


def test_the_api_server_takes_a_placement_sweep_and_refuses_servers_apart_without_servers(admin, namespace):
    response = admin.session.post(admin.url + admin.path("DistributedTrainingExperiment", namespace),
                                  json=dtes.experiment(
        "apart", namespace, architecture="RingAllReduce", scheduling={"placement": {"servers": "Apart"}}), timeout=30)
    assert response.status_code == 422
    assert "`scheduling.placement.servers` Apart needs `architecture` ParameterServer" in response.json()["message"]
    created = admin.create(dtes.experiment("placed", namespace, sweep={"matrix": {
        "placement": [{"ranks": "Spread"}, {"ranks": "Pack", "servers": "Apart"}]}}))
    # The API server defaults each placement's fields, as the pydantic model does.
    assert created["spec"]["sweep"]["matrix"]["placement"][1] == {
        "ranks": "Pack", "servers": "Apart", "topologyKey": "kubernetes.io/hostname", "mode": "Required"}
    assert "placement" not in created["spec"]["scheduling"]


def test_an_unmet_required_placement_waits_with_a_warning_then_fails_with_its_own_reason(admin, namespace, operator):
    operator()
    admin.create(dtes.experiment("spread", namespace, scheduling={"placement": {"ranks": "Spread"}},
                                 runPolicy={"startupDeadlineSeconds": 6}))
    pods = wait_for("3 pods", lambda: (lambda found: len(found) == 3 and found)(admin.trial_pods(namespace, "spread")))
    for pod in pods[:2]:
        admin.run_pod(pod)
    admin.unschedulable(pods[2], UNMET)
    assert all(p["spec"]["affinity"]["podAntiAffinity"] for p in pods)
    failed = wait_for("phase Failed", lambda: dtes.phase(admin.experiment(namespace, "spread")) == "Failed"
                      and admin.experiment(namespace, "spread"), timeout=60)
    trial = dtes.trials(failed)[0]
    assert trial["reason"] == "PlacementUnsatisfiable"
    assert trial["message"].startswith("placement Spread by kubernetes.io/hostname was not met within "
                                       "startupDeadlineSeconds=6") and UNMET in trial["message"]
    warnings = [e for e in admin.events(namespace, "spread") if e["reason"] == "WaitingForPlacement"]
    assert warnings and warnings[0]["type"] == "Warning" and "placement Spread" in warnings[0]["message"]
    wait_for("the pods to be deleted", lambda: admin.trial_pods(namespace, "spread") == [])

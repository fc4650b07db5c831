"""Apiserver tier: the operator's MLflow credentials go to its own tracking server and nowhere else.

The operator runs with MLFLOW_TRACKING_TOKEN in its environment and its --tracking-uri pointing at a
loopback listener in front of a real `mlflow server`. An experiment naming another loopback listener
as its `tracking.uri` is recorded there only when the operator's admin allows that server, and then
the listener never sees the token: its pods use the experiment's own credentialsSecret. Not allowed,
the experiment fails, saying how to fix it, and the listener is never called.
"""

import json

import pytest

import experiments as dtes
from apiserver_client import wait_for
from loopback import Listener
from tracking_listener import MlflowServer

SECRET = "operator-token-9d2e51"


@pytest.fixture
def mlflow_server(tmp_path):
    server = MlflowServer(tmp_path)
    server.wait_healthy()
    yield server
    server.stop()


@pytest.fixture
def listeners():
    made = []

    def make(upstream=None) -> Listener:
        made.append(Listener(upstream))
        return made[-1]

    yield make
    for listener in made:
        listener.close()


def created_pods(admin, namespace, name):
    return wait_for(f"3 pods of {name}", lambda: (lambda found: len(found) == 3 and found)(
        admin.trial_pods(namespace, name)), timeout=120)


def test_an_experiments_tracking_server_never_sees_the_operators_credentials(admin, namespace, operator, mlflow_server,
                                                                             listeners):
    own, named = listeners(mlflow_server.uri), listeners(mlflow_server.uri)
    running = operator(extra_args=("--tracking-uri", own.uri, "--tracking-allowed-uri", named.uri,
                                   "--tracking-timeout", "60"),
                       extra_env={"MLFLOW_TRACKING_TOKEN": SECRET})
    admin.create(dtes.experiment("on-the-operators-server", namespace))
    admin.create(dtes.experiment("on-its-own-server", namespace,
                                 tracking={"uri": named.uri, "credentialsSecret": {"name": "team-mlflow"}}))
    operators_pods = created_pods(admin, namespace, "on-the-operators-server")
    own_pods = created_pods(admin, namespace, "on-its-own-server")
    for name in ("on-the-operators-server", "on-its-own-server"):
        assert dtes.trials(admin.experiment(namespace, name))[0]["runId"]  # both were recorded

    # Its own server got the token with every call; the experiment's server got requests, never the token.
    assert own.seen() and own.authorizations() == {f"Bearer {SECRET}"}
    assert named.seen() and named.authorizations() == {None}
    assert not named.saw(SECRET)
    # The pods get their experiment's server and Secret, and nothing of the operator's.
    assert {dtes.env_of(p)["MLFLOW_TRACKING_URI"] for p in own_pods} == {named.uri}
    assert {json.dumps(p["spec"]["containers"][0]["envFrom"]) for p in own_pods} == {
        json.dumps([{"secretRef": {"name": "team-mlflow"}}])}
    assert {dtes.env_of(p)["MLFLOW_TRACKING_URI"] for p in operators_pods} == {own.uri}
    for shown in [*operators_pods, *own_pods, *admin.events(namespace, "on-its-own-server"),
                  admin.experiment(namespace, "on-its-own-server")]:
        assert SECRET not in json.dumps(shown)
    assert SECRET not in running.log.read_text(errors="replace")


def test_a_tracking_server_the_admin_did_not_allow_is_never_called(admin, namespace, operator, listeners):
    own, named = listeners(), listeners()
    operator(extra_args=("--tracking-uri", own.uri), extra_env={"MLFLOW_TRACKING_TOKEN": SECRET})
    admin.create(dtes.experiment("elsewhere", namespace, tracking={"uri": named.uri}))
    failed = wait_for("phase Failed", lambda: dtes.phase(admin.experiment(namespace, "elsewhere")) == "Failed"
                      and admin.experiment(namespace, "elsewhere"))
    condition = dtes.condition(failed, "Failed")
    assert condition["reason"] == "TrackingUriNotAllowed"
    assert named.uri in condition["message"] and "tracking.allowedUris" in condition["message"]
    assert any(e["reason"] == "TrackingUriNotAllowed" for e in admin.events(namespace, "elsewhere"))
    assert admin.trial_pods(namespace, "elsewhere") == []
    assert named.seen() == []


def test_the_api_server_refuses_credentials_inside_a_tracking_uri(admin, namespace):
    response = admin.session.post(admin.url + admin.path("DistributedTrainingExperiment", namespace),
                                  json=dtes.experiment(
        "inline-password", namespace, tracking={"uri": "http://alice:pw@mlflow:5000"}), timeout=30)
    assert response.status_code == 422
    assert "tracking.credentialsSecret" in response.json()["message"]

"""Apiserver tier: the chart's optional guard rails (guardRails.*), a ValidatingAdmissionPolicy the API server enforces.

The chart is rendered by helm with limits on images, priority classes, tolerations and workers, and its
policy and binding are applied to a real kube-apiserver. Experiments within the limits are created;
each one outside them is refused by the API server itself with the policy's message, for any client
(here the cluster admin, whom RBAC would let do anything). No operator runs: admission is all there is.
"""

from __future__ import annotations

import secrets
import subprocess

import pytest
import yaml

import apiserver_tier as apiserver
import experiments as dtes
from apiserver_client import wait_for

from ringleader.api import constants

LABEL = "ringleader.dev/guard-rails"
LIMITS = ["--set", "guardRails.enabled=true",
          "--set", "guardRails.allowedImagePrefixes={registry.example.com/ml/}",
          "--set", "guardRails.allowedPriorityClasses={research,research-low}",
          "--set", "guardRails.allowedTolerationKeys={nvidia.com/gpu}",
          "--set", "guardRails.maxWorkersPerExperiment=8"]
POLICY_KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")


@pytest.fixture
def guarded(admin):
    """A namespace under the chart's guard rails (bound by a label unique to this test); removed afterwards."""
    helm = apiserver.helm_binary()
    if helm is None:
        pytest.skip("helm is not built: cluster/build-tools.sh helm")
    value = f"on-{secrets.token_hex(3)}"  # never all digits, which helm --set would make a number
    key = LABEL.replace(".", r"\.")  # helm --set splits keys at unescaped dots
    rendered = subprocess.run(
        [helm, "template", f"rails-{value[3:]}", str(apiserver.ROOT / "charts" / "ringleader"), "--namespace",
         "ringleader-system", *LIMITS, "--set", f"guardRails.namespaceLabels.{key}={value}"],
        check=True, capture_output=True, text=True, timeout=60).stdout
    objects = [d for d in yaml.safe_load_all(rendered) if d and d["kind"] in POLICY_KINDS]
    assert sorted(o["kind"] for o in objects) == sorted(POLICY_KINDS)
    namespace = f"g-{value[3:]}"
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": {LABEL: value}}})
    for obj in objects:
        admin.create(obj)
    policy = objects[0]["metadata"]["name"]
    yield namespace, policy
    for obj in reversed(objects):
        admin.delete(obj["kind"], None, obj["metadata"]["name"])
    admin.delete("Namespace", None, namespace)


def create(admin, experiment) -> str | None:
    """None when the API server created the experiment; else the message it refused it with."""
    answer = admin.request("POST", admin.path(constants.KIND, experiment["metadata"]["namespace"]), body=experiment,
                           ok=(201, 403, 422))
    return answer["message"] if answer.get("kind") == "Status" else None


def checked_status(admin, policy: str) -> dict | None:
    """The policy's status once the controller type-checked its current generation against the CRD."""
    found = admin.get("ValidatingAdmissionPolicy", None, policy)
    status = found.get("status", {})
    return status if status.get("observedGeneration") == found["metadata"]["generation"] else None


def in_force(admin, namespace: str, policy: str) -> None:
    """Wait until the policy is type-checked against the CRD, without a warning, and refusing."""
    status = wait_for("the policy to be type-checked", lambda: checked_status(admin, policy), timeout=60)
    assert status.get("typeChecking", {}).get("expressionWarnings") in (None, []), status
    # Admission picks a new policy up within a few seconds; a probe created meanwhile is simply kept.
    wait_for("the guard rails to be in force", lambda: create(admin, dtes.experiment(
        f"probe-{secrets.token_hex(2)}", namespace, image="docker.io/someone/miner:1")), timeout=60)


def test_the_api_server_refuses_experiments_outside_the_guard_rails_with_the_policys_message(admin, guarded):
    namespace, policy = guarded
    in_force(admin, namespace, policy)

    within = dtes.experiment("within", namespace, image="registry.example.com/ml/ringleader:0.1.0",
                             workers={"replicas": 8},
                             scheduling={"priorityClassName": "research",
                                         "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]})
    assert create(admin, within) is None
    assert create(admin, dtes.experiment("defaults", namespace)) is None  # no image, no priority: the defaults
    assert create(admin, dtes.experiment("sweep-within", namespace, sweep={
        "matrix": {"workers": [2, 4]}, "maxParallel": 2})) is None  # 4 x 2 = 8 workers at once

    refused = {
        "image": dtes.experiment("image", namespace, image="registry.example.com.evil.io/ml/x:1"),
        "priority": dtes.experiment("priority", namespace, scheduling={"priorityClassName": "system-node-critical"}),
        "toleration": dtes.experiment("toleration", namespace, scheduling={"tolerations": [{"operator": "Exists"}]}),
        "workers": dtes.experiment("workers", namespace, workers={"replicas": 9}),
        "sweep": dtes.experiment("sweep", namespace, sweep={"matrix": {"workers": [2, 4]}, "maxParallel": 3}),
    }
    messages = {name: create(admin, experiment) for name, experiment in refused.items()}
    assert all(message and f"ValidatingAdmissionPolicy '{policy}'" in message
               for message in messages.values()), messages
    assert ("`spec.image` registry.example.com.evil.io/ml/x:1 is not allowed in this cluster: use an image "
            "starting with registry.example.com/ml/" in messages["image"])
    assert ("`spec.scheduling.priorityClassName` system-node-critical is not allowed in this cluster: "
            "use one of research, research-low" in messages["priority"])
    assert "may tolerate only taints with the keys nvidia.com/gpu" in messages["toleration"]
    assert ("`spec.workers`: this experiment runs up to 9 workers at once (9 per trial times sweep.maxParallel 1) "
            "but this cluster allows at most 8: lower workers.replicas" in messages["workers"])
    assert "runs up to 12 workers at once (4 per trial times sweep.maxParallel 3)" in messages["sweep"]
    assert all(admin.experiment(namespace, name) is None for name in refused)

    # Only creation is checked: no later change can get around a limit, since the schema keeps these fields as created.
    answer = admin.request("PATCH", admin.path(constants.KIND, namespace, "defaults"), ok=(200, 403, 422),
                           body={"spec": {"image": "docker.io/someone/miner:1"}},
                           content_type="application/merge-patch+json")
    assert answer["code"] == 422 and "`spec.image` cannot be added or removed after creation" in answer["message"]


def test_namespaces_outside_the_binding_are_free_and_experiments_from_before_the_limits_can_still_be_managed(
        admin, guarded, namespace):
    labelled, policy = guarded
    in_force(admin, labelled, policy)
    assert create(admin, dtes.experiment("free", namespace, image="docker.io/someone/anything:1",
                                         workers={"replicas": 64})) is None

    # The namespace comes under the guard rails: new experiments there are refused, the one from before is kept
    # and can still be suspended and deleted.
    value = admin.get("Namespace", None, labelled)["metadata"]["labels"][LABEL]
    admin.patch("Namespace", None, namespace, {"metadata": {"labels": {LABEL: value}}})
    wait_for("the guard rails to reach the namespace", lambda: create(admin, dtes.experiment(
        f"probe-{secrets.token_hex(2)}", namespace, workers={"replicas": 64})), timeout=60)
    admin.patch(constants.KIND, namespace, "free", {"spec": {"runPolicy": {"suspend": True}}})
    assert admin.experiment(namespace, "free")["spec"]["runPolicy"]["suspend"] is True
    admin.delete(constants.KIND, namespace, "free")

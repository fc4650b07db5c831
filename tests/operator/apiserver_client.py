"""The tests' side of the API server: a tiny JSON client, and the kubelet's part (writing pod status) played by hand."""

from __future__ import annotations

import datetime
import time
from typing import Any, Callable

import requests
import yaml

from ringleader.api import constants

# Paths of the kinds the tests create, by kind: (prefix, plural, namespaced).
KINDS = {
    "Namespace": ("/api/v1", "namespaces", False),
    "ServiceAccount": ("/api/v1", "serviceaccounts", True),
    "Pod": ("/api/v1", "pods", True),
    "Service": ("/api/v1", "services", True),
    "ConfigMap": ("/api/v1", "configmaps", True),
    "Event": ("/api/v1", "events", True),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "CustomResourceDefinition": ("/apis/apiextensions.k8s.io/v1", "customresourcedefinitions", False),
    "ValidatingAdmissionPolicy": ("/apis/admissionregistration.k8s.io/v1", "validatingadmissionpolicies", False),
    "ValidatingAdmissionPolicyBinding": ("/apis/admissionregistration.k8s.io/v1", "validatingadmissionpolicybindings",
                                         False),
    "Secret": ("/api/v1", "secrets", True),
    "ResourceFlavor": ("/apis/kueue.x-k8s.io/v1beta1", "resourceflavors", False),
    "ClusterQueue": ("/apis/kueue.x-k8s.io/v1beta1", "clusterqueues", False),
    "LocalQueue": ("/apis/kueue.x-k8s.io/v1beta1", "localqueues", True),
    "Workload": ("/apis/kueue.x-k8s.io/v1beta1", "workloads", True),
    "Topology": ("/apis/kueue.x-k8s.io/v1beta1", "topologies", False),
    "Node": ("/api/v1", "nodes", False),
    constants.KIND: (f"/apis/{constants.API_VERSION}", constants.PLURAL, True),
}


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Client:
    def __init__(self, url: str, token: str, ca) -> None:
        self.url = url
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"
        self.session.verify = str(ca)
        # Loopback only: ignore proxy and CA-bundle variables of the environment (which would override ours).
        self.session.trust_env = False

    def path(self, kind: str, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        prefix, plural, namespaced = KINDS[kind]
        path = f"{prefix}/namespaces/{namespace}/{plural}" if namespaced else f"{prefix}/{plural}"
        return path + (f"/{name}" if name else "") + (f"/{sub}" if sub else "")

    def request(self, method: str, path: str, *, ok=(200, 201), body=None, content_type="application/json", **params):
        response = self.session.request(method, self.url + path, json=body, params=params or None, timeout=30,
                                        headers={"Content-Type": content_type})
        if response.status_code not in ok:
            raise AssertionError(f"{method} {path}: HTTP {response.status_code}: {response.text[:500]}")
        return response.json() if response.content else None

    def create(self, obj: dict[str, Any], *, exists_ok: bool = False) -> dict[str, Any] | None:
        namespace = obj["metadata"].get("namespace")
        return self.request("POST", self.path(obj["kind"], namespace), body=obj,
                            ok=(200, 201, 409) if exists_ok else (200, 201))

    def apply_yaml(self, text: str, kinds: tuple[str, ...] | None = None) -> None:
        for obj in yaml.safe_load_all(text):
            if obj and (kinds is None or obj["kind"] in kinds):
                self.create(obj, exists_ok=True)

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        found = self.request("GET", self.path(kind, namespace, name), ok=(200, 404))
        return None if found.get("kind") == "Status" else found

    def list(self, kind: str, namespace: str | None, **params) -> list[dict[str, Any]]:
        return self.request("GET", self.path(kind, namespace), **params)["items"]

    def patch(self, kind: str, namespace: str | None, name: str, body: dict[str, Any], sub: str | None = None):
        return self.request("PATCH", self.path(kind, namespace, name, sub), body=body,
                            content_type="application/merge-patch+json")

    def delete(self, kind: str, namespace: str | None, name: str) -> None:
        self.request("DELETE", self.path(kind, namespace, name), ok=(200, 202, 404))

    # -- experiments and their pods ----------------------------------------------------------------

    def experiment(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.get(constants.KIND, namespace, name)

    def trial_pods(self, namespace: str, experiment: str) -> list[dict[str, Any]]:
        pods = self.list("Pod", namespace, labelSelector=f"{constants.LABEL_EXPERIMENT}={experiment}")
        return sorted((p for p in pods if not p["metadata"].get("deletionTimestamp")),
                      key=lambda p: p["metadata"]["name"])

    def table(self, namespace: str, name: str) -> dict[str, Any]:
        """What `kubectl get dte` prints, as the API server renders it from the CRD's printer columns: {column:
        cell}."""
        response = self.session.get(f"{self.url}{self.path(constants.KIND, namespace, name)}", timeout=30,
                                    headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
        response.raise_for_status()
        found = response.json()
        return dict(zip((c["name"] for c in found["columnDefinitions"]), found["rows"][0]["cells"]))

    def events(self, namespace: str, name: str) -> list[dict[str, Any]]:
        return self.list("Event", namespace, fieldSelector=f"involvedObject.name={name}")

    # -- the kubelet's part ------------------------------------------------------------------------

    def _pod_status(self, pod: dict[str, Any], status: dict[str, Any]) -> None:
        self.patch("Pod", pod["metadata"]["namespace"], pod["metadata"]["name"], {"status": status}, sub="status")

    @staticmethod
    def _container(pod: dict[str, Any], state: dict[str, Any], ready: bool) -> dict[str, Any]:
        container = pod["spec"]["containers"][0]
        return {"name": container["name"], "image": container["image"], "imageID": "", "ready": ready,
                "restartCount": 0, "state": state}

    def run_pod(self, pod: dict[str, Any]) -> None:
        """Scheduled, started and ready, as a kubelet would report it."""
        self._pod_status(pod, {
            "phase": "Running", "startTime": now(),
            "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now()},
                           {"type": "Ready", "status": "True", "lastTransitionTime": now()}],
            "containerStatuses": [self._container(pod, {"running": {"startedAt": now()}}, True)],
        })

    def unschedulable(self, pod: dict[str, Any], message: str) -> None:
        self._pod_status(pod, {"phase": "Pending", "conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
            "lastTransitionTime": now()}]})

    def waiting(self, pod: dict[str, Any], reason: str, message: str) -> None:
        """Scheduled, its container waiting to start: ImagePullBackOff, CreateContainerConfigError, ..."""
        self._pod_status(pod, {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now()}],
            "containerStatuses": [self._container(pod, {"waiting": {"reason": reason, "message": message}}, False)],
        })

    def finish_pod(self, pod: dict[str, Any], exit_code: int, reason: str, message: str | None = None) -> None:
        """The container exited; the pod phase follows the exit code (restartPolicy Never)."""
        terminated = {"exitCode": exit_code, "reason": reason, "startedAt": now(), "finishedAt": now()}
        if message:
            terminated["message"] = message
        self._pod_status(pod, {
            "phase": "Succeeded" if exit_code == 0 else "Failed",
            "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now()},
                           {"type": "Ready", "status": "False", "lastTransitionTime": now()}],
            "containerStatuses": [self._container(pod, {"terminated": terminated}, False)],
        })


def wait_for(what: str, check: Callable[[], Any], timeout: float = 30.0, interval: float = 0.2) -> Any:
    """Poll `check` until it returns something truthy; fail saying `what` did not happen in time."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except (AssertionError, KeyError, IndexError, TypeError) as error:
            last = error
        else:
            if last:
                return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")

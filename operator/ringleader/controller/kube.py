"""The few Kubernetes API calls the controller makes, as JSON in and out; used by `reconciler` and `handlers`.

Every call here is one verb the Helm chart's RBAC grants (get/list/create/delete/patch, pods/log get, in
cluster-wide mode list on nodes and pods of every namespace, and with Kueue enabled list/create/delete on
workloads and patch on workloads/status),
so the chart and this module can be read side by side. Calls run the blocking `kubernetes` client in a
pool of threads of their own (as many as the client keeps connections, `ApiSettings.concurrency`): a
512-worker trial's creates then run side by side instead of queueing behind asyncio's small default
pool, and no call opens a new TLS connection because the pool of connections was full. Errors become
kopf's retry types: a 5xx, 429 or broken connection is a TemporaryError, a 403 a `Forbidden` one;
409 AlreadyExists on create and 404 on delete are successes (idempotent, never a duplicate).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json
import urllib.parse
from typing import Any

import kopf
import kubernetes
import urllib3

from ringleader.api import constants

# Plurals of the kinds the topology renders (no discovery round-trips at startup).
PLURALS = {"Pod": "pods", "Service": "services", "ConfigMap": "configmaps", "PodGroup": "podgroups",
           "Workload": "workloads"}
WORKLOADS_API_VERSION = "kueue.x-k8s.io/v1beta1"
FIELD_MANAGER = "ringleader"
REQUEST_TIMEOUT = (5.0, 30.0)  # seconds: connect, read
# A log's tail comes in milliseconds from a kubelet that answers; the API server proxies the read to the pod's
# node, so a node going silent would otherwise hold the pass that reads it for the whole read timeout.
LOG_TIMEOUT = (5.0, 10.0)
RETRY_DELAY = 5.0  # seconds before retrying a failed API call
FORBIDDEN_RETRY_DELAY = 60.0  # seconds: RBAC changes take an administrator, not a moment
# The API server's words for a create in a namespace under deletion ("... because it is being terminated").
_TERMINATING = "because it is being terminated"
# A pod the API server only admits, never stores (dryRun): whether the namespace still takes new objects.
_PROBE_POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "ringleader-namespace-probe-"},
              "spec": {"containers": [{"name": "probe", "image": "ringleader-namespace-probe"}]}}


class Forbidden(kopf.TemporaryError):
    """The API server refused a call (403): the operator's RBAC lacks a verb. Retried with a growing delay, since
    only an administrator can fix it; the experiment says so in its ReconcileFailed condition."""


class NamespaceTerminating(Exception):
    """The experiment's namespace is being deleted: the API server refuses anything new in it (403), which is no
    RBAC problem and no failure of the trial; nothing is retried."""


class InvalidObject(Exception):
    """The API server refused an object as invalid (400/422): retrying the same object cannot succeed."""


class LogUnavailable(Exception):
    """A container's log could not be read: no node serves it yet (HTTP 204), the kubelet is away, or the call
    failed."""


def configure(connections: int) -> kubernetes.client.ApiClient:
    """An API client from the pod's service account, or else from $KUBECONFIG / ~/.kube/config, keeping up to
    `connections` connections open."""
    try:
        kubernetes.config.load_incluster_config()
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config()
    configuration = kubernetes.client.Configuration.get_default_copy()
    configuration.connection_pool_maxsize = connections
    return kubernetes.client.ApiClient(configuration)


def collection_path(api_version: str, kind: str, namespace: str) -> str:
    plural = PLURALS.get(kind) or (constants.PLURAL if kind == constants.KIND else None)
    if plural is None:
        raise ValueError(f"ringleader does not create objects of kind {kind}")
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    return f"{prefix}/namespaces/{namespace}/{plural}"


def experiment_path(namespace: str, name: str) -> str:
    return f"{collection_path(constants.API_VERSION, constants.KIND, namespace)}/{name}"


def _message(data: Any) -> str:
    """The message of an API server's error answer, decoded or not (`raw`)."""
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except json.JSONDecodeError:
            return data
    return data.get("message", "") if isinstance(data, dict) else str(data)


class Kube:
    """Async JSON access to the API server over one shared client, `threads` calls at a time."""

    def __init__(self, client: kubernetes.client.ApiClient, threads: int) -> None:
        self._client = client
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kube")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def _in_pool(self, *args, **kwargs) -> tuple[int, Any]:
        call = functools.partial(self._call, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._pool, call)

    def _call(self, method: str, path: str, *, query: dict[str, Any] | None = None, body: Any = None,
              content_type: str = "application/json", raw: bool = False,
              timeout: tuple[float, float] = REQUEST_TIMEOUT) -> tuple[int, Any]:
        if query:
            path = f"{path}?{urllib.parse.urlencode(query)}"
        headers = {"Accept": "application/json, */*", "Content-Type": content_type}
        request = self._client.param_serialize(method, path, header_params=headers, body=body,
                                               auth_settings=["BearerToken"])
        try:
            response = self._client.call_api(*request, _request_timeout=timeout)
            data = response.read()
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise kopf.TemporaryError(f"{method} {path}: API server unreachable: {error}", delay=RETRY_DELAY) from error
        if raw:
            return response.status, data.decode("utf-8", "replace") if data else ""
        try:
            return response.status, json.loads(data) if data else None
        except json.JSONDecodeError:
            return response.status, {"message": data.decode("utf-8", "replace")}

    async def _request(self, method: str, path: str, *, ok: tuple[int, ...] = (), **kwargs) -> tuple[int, Any]:
        status, data = await self._in_pool(method, path, **kwargs)
        if 200 <= status < 300 or status in ok:
            return status, data
        message = _message(data)
        if status in (400, 422):
            raise InvalidObject(message)
        if status == 403 and _TERMINATING in message:
            raise NamespaceTerminating(message)
        if status == 403:
            raise Forbidden(f"{method} {path} is forbidden: {message}; check the operator's RBAC "
                            "(the Helm chart grants exactly what it needs)", delay=FORBIDDEN_RETRY_DELAY)
        raise kopf.TemporaryError(f"{method} {path} failed with HTTP {status}: {message}", delay=RETRY_DELAY)

    async def namespace_terminating(self, namespace: str) -> bool:
        """Whether `namespace` is being deleted, asked without Namespace RBAC: a dry-run pod create, which the API
        server refuses there and nowhere else with these words; stores nothing."""
        status, data = await self._in_pool("POST", f"/api/v1/namespaces/{namespace}/pods", query={"dryRun": "All"},
                                           body=_PROBE_POD)
        return status == 403 and _TERMINATING in _message(data)

    async def get_experiment(self, namespace: str, name: str) -> dict[str, Any] | None:
        status, data = await self._request("GET", experiment_path(namespace, name), ok=(404,))
        return None if status == 404 else data

    async def list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        _, data = await self._request("GET", f"/api/v1/namespaces/{namespace}/pods", query={"labelSelector": selector})
        return list(data.get("items") or [])

    async def list_nodes(self) -> list[dict[str, Any]]:
        _, data = await self._request("GET", "/api/v1/nodes")
        return list(data.get("items") or [])

    async def list_bound_pods(self) -> list[dict[str, Any]]:
        """Every pod bound to a node, in every namespace: what holds the nodes' resources (ended pods included, so a
        pod the operator admitted is seen bound even if it ended between two reads)."""
        _, data = await self._request("GET", "/api/v1/pods", query={"fieldSelector": "spec.nodeName!="})
        return list(data.get("items") or [])

    async def create(self, obj: dict[str, Any]) -> bool:
        """Create `obj`; True if created, False if it already existed. Raises InvalidObject if refused."""
        metadata = obj["metadata"]
        path = collection_path(obj["apiVersion"], obj["kind"], metadata["namespace"])
        # The answer (the object as created) is not needed: left undecoded, as a status write's.
        status, _ = await self._request("POST", path, body=obj, ok=(409,), raw=True)
        return status != 409

    async def list_workloads(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        _, data = await self._request("GET", collection_path(WORKLOADS_API_VERSION, "Workload", namespace),
                                      query={"labelSelector": selector})
        return list(data.get("items") or [])

    async def delete_workload(self, namespace: str, name: str, uid: str | None = None) -> None:
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        if uid:  # never a newer Workload that took the same name
            body["preconditions"] = {"uid": uid}
        await self._request("DELETE", f"{collection_path(WORKLOADS_API_VERSION, 'Workload', namespace)}/{name}",
                            body=body, ok=(404, 409))

    async def finish_workload(self, namespace: str, name: str, condition: dict[str, Any]) -> None:
        """Add the Finished condition to a Workload's status, as Kueue's own job integrations do: a server-side apply
        of that one condition, so Kueue's conditions (kept in the same list, keyed by type) stay as they are."""
        body = {"apiVersion": WORKLOADS_API_VERSION, "kind": "Workload",
                "metadata": {"name": name, "namespace": namespace},
                "status": {"conditions": [condition]}}
        path = f"{collection_path(WORKLOADS_API_VERSION, 'Workload', namespace)}/{name}/status"
        # Sent as text: JSON is YAML, and the client serializes dicts only for JSON content types.
        await self._request("PATCH", path, body=json.dumps(body),
                            query={"fieldManager": FIELD_MANAGER, "force": "true"},
                            content_type="application/apply-patch+yaml", ok=(404,))

    async def delete_pod(self, namespace: str, name: str, *, force: bool = False) -> None:
        # Background propagation and the pod's own grace period: the kubelet stops it as it would any pod. A pod
        # on a lost node is removed at once (grace 0): its kubelet would never confirm; it stops its containers
        # itself if the node comes back and finds the pod gone.
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        if force:
            body["gracePeriodSeconds"] = 0
        await self._request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", body=body, ok=(404, 409))

    async def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        # The answer (the whole experiment) is not needed: left undecoded, a progress write costs less CPU.
        await self._request("PATCH", f"{experiment_path(namespace, name)}/status", body={"status": status},
                            content_type="application/merge-patch+json", ok=(404,), raw=True)

    async def delete_experiment(self, namespace: str, name: str, uid: str) -> None:
        # The uid precondition: never delete a newer experiment that took the same name.
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background",
                "preconditions": {"uid": uid}}
        await self._request("DELETE", experiment_path(namespace, name), body=body, ok=(404, 409))

    async def read_log(self, namespace: str, name: str, container: str | None, *, tail_lines: int,
                       limit_bytes: int) -> str:
        """The tail of a container's log, each line after the time it was written (the kubelet's RFC 3339
        timestamp); LogUnavailable, saying why, when it cannot be read."""
        query: dict[str, Any] = {"tailLines": tail_lines, "limitBytes": limit_bytes, "timestamps": "true"}
        if container:
            query["container"] = container
        try:
            status, text = await self._in_pool("GET", f"/api/v1/namespaces/{namespace}/pods/{name}/log", query=query,
                                               raw=True, timeout=LOG_TIMEOUT)
        except kopf.TemporaryError as error:
            raise LogUnavailable(str(error)) from None
        if status == 204:
            raise LogUnavailable("HTTP 204: no node serves the pod's log")
        if status != 200:
            raise LogUnavailable(f"HTTP {status}: {' '.join(text.split())[:200]}")
        return text

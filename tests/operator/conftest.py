"""Fixtures of the operator tests: the apiserver tier, the CRD, a namespace per test, and the operator as a subprocess.

The operator runs as `python -m ringleader.controller` with the chart's RBAC (operator_process.py).
"""

from __future__ import annotations

import secrets

import pytest

# tests/operator is deliberately not a package (it would be imported as `operator`, shadowing the
# standard library); pytest puts this directory on sys.path, so its helper modules import by name.
import apiserver_tier as apiserver
import kubelet
import kueue_tier
from apiserver_client import Client
from operator_process import Operator, chart_rbac, install_crds


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    if apiserver.binaries() is None:
        pytest.skip("apiserver tier needs etcd, kube-apiserver and kube-controller-manager: "
                    "run cluster/build-kubernetes.sh and cluster/build-tools.sh etcd")
    with apiserver.running(tmp_path_factory.mktemp("apiserver")) as server:
        install_crds(Client(server.url, server.admin_token, server.ca))
        yield server


@pytest.fixture(scope="session")
def admin(cluster) -> Client:
    return Client(cluster.url, cluster.admin_token, cluster.ca)


@pytest.fixture(scope="session")
def kueue(cluster, admin, tmp_path_factory):
    """A real Kueue controller manager against the apiserver tier, for the whole session; yields its log."""
    if not kueue_tier.built():
        pytest.skip("Kueue is not built: run cluster/build-kubernetes.sh (it builds Kueue with Kubernetes)")
    with kueue_tier.running(cluster, admin, tmp_path_factory.mktemp("kueue")) as log:
        yield log


@pytest.fixture
def namespace(admin) -> str:
    name = f"t-{secrets.token_hex(3)}"
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    # The serviceaccount controller creates it too; creating it here saves waiting for it.
    admin.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": name}},
                 exists_ok=True)
    return name


class ServedLogs(dict):
    """{pod name: its log so far}, which the played kubelet serves ("" for any other pod); `server` is the
    kubelet.LogServer on 127.0.0.1 (its `pods`: whose logs were asked for)."""

    server: kubelet.LogServer


@pytest.fixture
def served_logs(admin, tmp_path):
    """The kubelet's log endpoint, played: the Node trial pods are bound to (kubelet.run_pod with bind=True), its
    logs served from the dict the test writes into."""
    logs = ServedLogs()
    logs.server = kubelet.LogServer(tmp_path, lambda pod: logs.get(pod, ""))
    try:
        kubelet.add_node(admin, logs.server.port)
        yield logs
    finally:
        logs.server.close()


@pytest.fixture
def operator(cluster, admin, namespace, tmp_path, request):
    """Start the operator watching this test's namespace (or, with `cluster_wide`, every namespace).

    Usage: operator(cluster_wide=False, extra_args=[...], extra_env={...}, chart_values=("--set", "k=v"),
    verbose=True) -> Operator (already started); `chart_values` shape the RBAC the chart grants it; verbose=False logs
    at the chart's default level."""
    started: list[Operator] = []

    def start(*, cluster_wide: bool = False, extra_args: tuple[str, ...] = (),
              extra_env: dict[str, str] | None = None, chart_values: tuple[str, ...] = (),
              verbose: bool = True) -> Operator:
        if cluster_wide:
            token = chart_rbac(admin, "rlc", list(chart_values))
            scope = []
        else:
            token = chart_rbac(admin, f"rl-{namespace}", ["--set", "scope.mode=Namespace",
                                                           "--set", f"scope.namespaces={{{namespace}}}",
                                                           *chart_values])
            scope = ["--namespace", namespace]
        config = apiserver.kubeconfig(tmp_path / "operator.kubeconfig", cluster.url, token or cluster.admin_token,
                                      cluster.ca)
        args = [*scope, "--progress-poll-interval", "1", "--recheck-interval", "10", *extra_args]
        running = Operator(config, args, tmp_path / "operator.log", extra_env, verbose=verbose).start()
        started.append(running)
        return running

    yield start
    for running in started:
        running.stop()
    report = getattr(request.node, "rep_call", None)
    if started and report is not None and report.failed:
        print("---- operator log (tail) ----\n" + started[-1].tail(150))


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)

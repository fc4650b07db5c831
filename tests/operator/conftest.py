"""Fixtures of the operator tests: the apiserver tier, the CRD, a namespace per test, and the operator as a subprocess.

The operator runs as `python -m ringleader.controller`, with the service account and RBAC that
the Helm chart renders (so the chart's least-privilege rules are exercised for real), falling back to
the admin token only when helm is not built.
"""

from __future__ import annotations

import os
import pathlib
import secrets
import signal
import subprocess
import sys
import time

import pytest
import yaml

from ringleader.api import constants

# tests/operator is deliberately not a package (it would be imported as `operator`, shadowing the
# standard library); pytest puts this directory on sys.path, so its helper modules import by name.
import apiserver_tier as apiserver
import kueue_tier
from apiserver_client import Client, wait_for

ROOT = pathlib.Path(__file__).resolve().parents[2]
OPERATOR_NAMESPACE = "ringleader-system"
KUBE_VERSION = "1.34.0"

@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    if apiserver.binaries() is None:
        pytest.skip("apiserver tier needs etcd, kube-apiserver and kube-controller-manager: "
                    "run cluster/build-kubernetes.sh and cluster/build-tools.sh etcd")
    with apiserver.running(tmp_path_factory.mktemp("apiserver")) as server:
        client = Client(server.url, server.admin_token, server.ca)
        # RINGLEADER_TEST_CRD_DIR tries a CRD under development instead of the committed crds/.
        crds = pathlib.Path(os.environ.get("RINGLEADER_TEST_CRD_DIR") or ROOT / "crds")
        for path in sorted(crds.glob("*.yaml")):
            client.apply_yaml(path.read_text())
        wait_for("the CRD to be established", lambda: any(
            c["type"] == "Established" and c["status"] == "True"
            for c in client.get("CustomResourceDefinition", None,
                                f"{constants.PLURAL}.{constants.GROUP}")["status"].get("conditions", [])))
        client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OPERATOR_NAMESPACE}}, exists_ok=True)
        yield server


@pytest.fixture(scope="session")
def admin(cluster) -> Client:
    return Client(cluster.url, cluster.admin_token, cluster.ca)


@pytest.fixture(scope="session")
def kueue(cluster, admin, tmp_path_factory):
    """A real Kueue controller manager against the apiserver tier, for the whole session; yields its log."""
    if not kueue_tier.built():
        pytest.skip("Kueue is not built: run cluster/build-kueue.sh")
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


def _chart_rbac(admin: Client, release: str, values: list[str]) -> str | None:
    """Apply the chart's ServiceAccount and RBAC for `release`; a token of that account, or None without helm."""
    helm = apiserver.helm_binary()
    if helm is None:
        return None
    rendered = subprocess.run(
        [helm, "template", release, str(ROOT / "charts" / "ringleader"), "--namespace", OPERATOR_NAMESPACE,
         "--kube-version", KUBE_VERSION, *values], check=True, capture_output=True, text=True, timeout=60).stdout
    admin.apply_yaml(rendered, kinds=("ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"))
    account = next(d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "ServiceAccount")["metadata"]["name"]
    token = admin.request("POST", admin.path("ServiceAccount", OPERATOR_NAMESPACE, account, "token"), body={
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 7200}})
    return token["status"]["token"]


class Operator:
    """`python -m ringleader.controller` against the apiserver tier; stop, kill and start it again at will."""

    def __init__(self, kubeconfig: pathlib.Path, args: list[str], log: pathlib.Path,
                 extra_env: dict[str, str] | None = None) -> None:
        self.kubeconfig, self.args, self.log = kubeconfig, args, log
        self.extra_env = extra_env or {}
        self.process: subprocess.Popen | None = None

    def start(self) -> Operator:
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "PYTHONPATH": str(ROOT / "operator"),
               "PYTHONUNBUFFERED": "1", **self.extra_env}
        with open(self.log, "ab") as log:
            log.write(f"\n=== start {time.strftime('%H:%M:%S')} {' '.join(self.args)}\n".encode())
            self.process = subprocess.Popen(
                [sys.executable, "-m", "ringleader.controller", "--liveness", "none", "--log-format", "plain",
                 "--verbose", *self.args], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        return self

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        self.process = None

    def kill(self) -> None:
        """An abrupt end (SIGKILL), as an OOM kill or a node loss would cause."""
        self.stop(signal.SIGKILL)

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:]) if self.log.exists() else ""


@pytest.fixture
def operator(cluster, admin, namespace, tmp_path, request):
    """Start the operator watching this test's namespace (or, with `cluster_wide`, every namespace).

    Usage: operator(cluster_wide=False, extra_args=[...], extra_env={...}, chart_values=("--set", "k=v")) -> Operator
    (already started); `chart_values` shape the RBAC the chart grants it."""
    started: list[Operator] = []

    def start(*, cluster_wide: bool = False, extra_args: tuple[str, ...] = (),
              extra_env: dict[str, str] | None = None, chart_values: tuple[str, ...] = ()) -> Operator:
        if cluster_wide:
            token = _chart_rbac(admin, "rlc", list(chart_values))
            scope = []
        else:
            token = _chart_rbac(admin, f"rl-{namespace}", ["--set", "scope.mode=Namespace",
                                                           "--set", f"scope.namespaces={{{namespace}}}",
                                                           *chart_values])
            scope = ["--namespace", namespace]
        config = apiserver.kubeconfig(tmp_path / "operator.kubeconfig", cluster.url, token or cluster.admin_token, cluster.ca)
        args = [*scope, "--progress-poll-interval", "1", "--recheck-interval", "10", *extra_args]
        running = Operator(config, args, tmp_path / "operator.log", extra_env).start()
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

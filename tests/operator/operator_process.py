"""The operator as the operator tests run it: `python -m ringleader.controller` with the Helm chart's RBAC; used by
conftest and bench/bench_operator.py.

The chart's ServiceAccount and RBAC are applied and a token of that account is used (so the chart's
least-privilege rules are exercised for real), falling back to the admin token only when helm is not built.
"""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import time

import yaml

from ringleader.api import constants

import apiserver_tier as apiserver
from apiserver_client import Client, wait_for

ROOT = pathlib.Path(__file__).resolve().parents[2]
OPERATOR_NAMESPACE = "ringleader-system"
KUBE_VERSION = "1.34.0"


def install_crds(admin: Client) -> None:
    """The CRDs (crds/, or $RINGLEADER_TEST_CRD_DIR to try one under development), established, and the
    operator's namespace."""
    crds = pathlib.Path(os.environ.get("RINGLEADER_TEST_CRD_DIR") or ROOT / "crds")
    for path in sorted(crds.glob("*.yaml")):
        admin.apply_yaml(path.read_text())
    wait_for("the CRD to be established", lambda: any(
        c["type"] == "Established" and c["status"] == "True"
        for c in admin.get("CustomResourceDefinition", None,
                           f"{constants.PLURAL}.{constants.GROUP}")["status"].get("conditions", [])))
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OPERATOR_NAMESPACE}}, exists_ok=True)


def chart_rbac(admin: Client, release: str, values: list[str]) -> str | None:
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
    """`python -m ringleader.controller` against the apiserver tier; stop, kill and start it again at will.

    `verbose` (the tests' default) logs kopf's debug lines; a benchmark turns it off, since at thousands of pods
    writing them costs more CPU than the operator's own work."""

    def __init__(self, kubeconfig: pathlib.Path, args: list[str], log: pathlib.Path,
                 extra_env: dict[str, str] | None = None, verbose: bool = True) -> None:
        self.kubeconfig, self.args, self.log = kubeconfig, args, log
        self.extra_env = extra_env or {}
        self.verbose = verbose
        self.process: subprocess.Popen | None = None

    def start(self) -> Operator:
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "PYTHONPATH": str(ROOT / "operator"),
               "PYTHONUNBUFFERED": "1", **self.extra_env}
        with open(self.log, "ab") as log:
            log.write(f"\n=== start {time.strftime('%H:%M:%S')} {' '.join(self.args)}\n".encode())
            self.process = subprocess.Popen(
                [sys.executable, "-m", "ringleader.controller", "--liveness", "none", "--log-format", "plain",
                 *(["--verbose"] if self.verbose else []), *self.args],
                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
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

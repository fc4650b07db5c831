"""The "apiserver tier": a real etcd, kube-apiserver and kube-controller-manager on 127.0.0.1, and nothing else.

Real API machinery (validation, CEL rules, status subresource, RBAC, owner references and the
garbage collector) but NO kubelet and NO scheduler: pods never run. Tests play the kubelet's part by
writing pod status (scheduled, running, exit codes, termination messages) through the API, and say
so. Binaries come from the cluster harness's cache (cluster/build-kubernetes.sh, build-tools.sh etcd).
Only loopback addresses are used. $RINGLEADER_KUBERNETES_BIN overrides the directory of the Kubernetes binaries.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import os
import pathlib
import secrets
import shutil
import subprocess
import time
from typing import Iterator

from loopback import free_port

ROOT = pathlib.Path(__file__).resolve().parents[2]
CACHE = pathlib.Path(os.environ.get("RINGLEADER_CACHE") or pathlib.Path.home() / ".cache" / "ringleader") / "cluster"
START_TIMEOUT = 120.0  # seconds: a cold kube-apiserver on two busy cores takes 20-40 s


def _versions() -> dict[str, str]:
    found = {}
    for line in (ROOT / "cluster" / "versions.env").read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, value = line.strip().split("=", 1)
            found[key] = value
    return found


def pinned(name: str) -> str:
    """A version pinned in cluster/versions.env ("" when it names none)."""
    return _versions().get(name, "")


def binaries() -> dict[str, pathlib.Path] | None:
    """etcd, kube-apiserver and kube-controller-manager from the harness cache, or None if not built yet."""
    versions = _versions()
    kubernetes = pathlib.Path(os.environ.get("RINGLEADER_KUBERNETES_BIN") or
                              CACHE / f"kubernetes-{versions.get('K8S_VERSION', '')}" / "bin")
    etcd = CACHE / f"etcd-{versions.get('ETCD_VERSION', '')}" / "bin" / "etcd"
    found = {"etcd": etcd, "kube-apiserver": kubernetes / "kube-apiserver",
             "kube-controller-manager": kubernetes / "kube-controller-manager"}
    return found if all(os.access(p, os.X_OK) for p in found.values()) else None


def helm_binary() -> str | None:
    for candidate in [os.environ.get("HELM"), *sorted(glob.glob(str(CACHE / "helm-*" / "bin" / "helm"))),
                      shutil.which("helm")]:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def stop(process: subprocess.Popen) -> None:
    """Terminate, then kill after 15 s: every process a tier starts ends with the tier."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def kubeconfig(path: pathlib.Path, server: str, token: str, ca: pathlib.Path) -> pathlib.Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: apiserver-tier\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\n"
        f"users:\n- name: user\n  user:\n    token: {token}\n"
        "contexts:\n- name: apiserver-tier\n  context: {cluster: apiserver-tier, user: user}\n"
        "current-context: apiserver-tier\n")
    path.chmod(0o600)
    return path


@dataclasses.dataclass
class ApiServer:
    url: str
    admin_token: str
    ca: pathlib.Path
    """The serving certificate kube-apiserver generated for itself (with its CA): clients verify against it."""
    admin_kubeconfig: pathlib.Path
    directory: pathlib.Path
    logs: pathlib.Path


def _wait_healthy(url: str, token: str, process: subprocess.Popen, log: pathlib.Path, ca: pathlib.Path) -> None:
    import requests

    deadline = time.monotonic() + START_TIMEOUT
    session = requests.Session()
    session.trust_env = False  # loopback only: no proxy, and the environment's CA bundle must not replace ours
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"kube-apiserver exited ({process.returncode}); see {log}")
        with contextlib.suppress(requests.RequestException):
            verify = str(ca) if ca.exists() else False  # the certificate appears once the server is up
            response = session.get(f"{url}/readyz", headers={"Authorization": f"Bearer {token}"}, verify=verify,
                                   timeout=2)
            if response.status_code == 200:
                return
        time.sleep(0.5)
    raise RuntimeError(f"kube-apiserver not ready within {START_TIMEOUT:.0f}s; see {log}")


@contextlib.contextmanager
def running(directory: pathlib.Path) -> Iterator[ApiServer]:
    """etcd + kube-apiserver + kube-controller-manager (garbage collector, service accounts) in `directory`."""
    found = binaries()
    if found is None:
        raise RuntimeError("Kubernetes binaries are not built: run cluster/build-kubernetes.sh and "
                           "cluster/build-tools.sh etcd")
    logs = directory / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    pki = directory / "pki"
    pki.mkdir(exist_ok=True)
    subprocess.run(["openssl", "genrsa", "-out", str(pki / "sa.key"), "2048"], check=True, capture_output=True)
    subprocess.run(["openssl", "rsa", "-in", str(pki / "sa.key"), "-pubout", "-out", str(pki / "sa.pub")],
                   check=True, capture_output=True)
    admin_token = secrets.token_hex(16)
    (pki / "tokens.csv").write_text(f'{admin_token},admin,admin-uid,"system:masters"\n')
    etcd_port, etcd_peer, api_port = free_port(), free_port(), free_port()
    url = f"https://127.0.0.1:{api_port}"
    ca = pki / "apiserver.crt"
    processes: list[tuple[subprocess.Popen, object]] = []

    def start(name: str, *args: str) -> subprocess.Popen:
        log = open(logs / f"{name}.log", "wb")
        process = subprocess.Popen([str(found[name]), *args], stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        processes.append((process, log))
        return process

    try:
        start("etcd", "--name=default", f"--data-dir={directory / 'etcd'}",
              f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
              f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
              f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
              f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
              f"--initial-cluster=default=http://127.0.0.1:{etcd_peer}", "--unsafe-no-fsync", "--log-level=warn",
              "--quota-backend-bytes=536870912")
        apiserver = start(
            "kube-apiserver",
            f"--etcd-servers=http://127.0.0.1:{etcd_port}", "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={api_port}", f"--cert-dir={pki}", f"--token-auth-file={pki / 'tokens.csv'}",
            "--authorization-mode=RBAC", "--service-cluster-ip-range=10.96.0.0/24",
            "--service-account-issuer=https://kubernetes.default.svc", f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}", "--api-audiences=https://kubernetes.default.svc",
            "--enable-priority-and-fairness=false", "--profiling=false", "--event-ttl=30m", "--v=1",
        )
        _wait_healthy(url, admin_token, apiserver, logs / "kube-apiserver.log", ca)
        admin = kubeconfig(directory / "admin.kubeconfig", url, admin_token, ca)
        # The garbage collector removes a deleted experiment's children; the serviceaccount controller
        # gives each namespace its "default" account, which pod admission requires; the policy status
        # controller type-checks ValidatingAdmissionPolicies (the chart's guard rails) against the CRD.
        start("kube-controller-manager", f"--kubeconfig={admin}",
              "--controllers=garbagecollector,serviceaccount,validatingadmissionpolicy-status-controller",
              "--leader-elect=false", "--bind-address=127.0.0.1", f"--secure-port={free_port()}",
              f"--service-account-private-key-file={pki / 'sa.key'}", "--concurrent-gc-syncs=5", "--v=1")
        yield ApiServer(url=url, admin_token=admin_token, ca=ca, admin_kubeconfig=admin, directory=directory, logs=logs)
    finally:
        for process, log in reversed(processes):
            stop(process)
            log.close()

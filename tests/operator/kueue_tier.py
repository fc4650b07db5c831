"""A real Kueue controller manager (built by cluster/build-kubernetes.sh) against the apiserver tier, on loopback only.

Kueue runs as its release does (internal certificate management on, its scheduler and Workload
controllers), but nothing registers its admission webhooks with the API server: the operator creates
Workloads itself, the documented integration for a custom workload API, which needs no webhook. Its
webhook server still starts (controller-runtime always serves it), bound to 127.0.0.1 with the
certificate Kueue issues into its Secret, which the test copies into Kueue's certDir as a Secret volume
would. Metrics and the visibility API server are off; leader election too (one replica).
"""

from __future__ import annotations

import base64
import contextlib
import os
import pathlib
import subprocess
import time
from typing import Iterator

import requests

from apiserver_client import Client, wait_for
import apiserver_tier as apiserver
from loopback import free_port

NAMESPACE = "kueue-system"
START_TIMEOUT = 120.0  # seconds: certificates, informers and the scheduler on two busy cores
CONFIG = pathlib.Path(__file__).resolve().parents[2] / "cluster" / "manifests" / "kueue-config.yaml"


def directory() -> pathlib.Path:
    return apiserver.CACHE / f"kueue-{apiserver.pinned('KUEUE_VERSION')}"


def built() -> bool:
    return os.access(directory() / "bin" / "kueue", os.X_OK) and (directory() / "crds").is_dir()


def install_crds(admin: Client) -> None:
    """Every CRD Established before Kueue starts: it watches all of them, and a kind not served yet stalls its
    caches (cluster/kueue-up.sh waits the same way)."""
    paths = sorted((directory() / "crds").glob("kueue.x-k8s.io_*.yaml"))
    for path in paths:
        admin.apply_yaml(path.read_text())
    names = [f"{path.stem.split('_', 1)[1]}.kueue.x-k8s.io" for path in paths]

    def established(name: str) -> bool:
        crd = admin.get("CustomResourceDefinition", None, name)
        return crd is not None and any(c["type"] == "Established" and c["status"] == "True"
                                       for c in (crd.get("status") or {}).get("conditions", []))

    wait_for(f"Kueue's {len(names)} CRDs to be established", lambda: all(map(established, names)), timeout=60)


def _config(work: pathlib.Path, health_port: int) -> pathlib.Path:
    """The harness's one Kueue configuration (cluster/manifests/kueue-config.yaml), its placeholders filled."""
    filled = {"@HEALTH_PORT@": str(health_port), "@WEBHOOK_PORT@": str(free_port()), "@CERT_DIR@": str(work / "certs")}
    text = CONFIG.read_text()
    for placeholder, value in filled.items():
        text = text.replace(placeholder, value)
    path = work / "kueue-config.yaml"
    path.write_text(text)
    return path


@contextlib.contextmanager
def running(server: apiserver.ApiServer, admin: Client, work: pathlib.Path) -> Iterator[pathlib.Path]:
    """Kueue's CRDs installed and its manager running until the block ends; yields its log."""
    install_crds(admin)
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}, exists_ok=True)
    # Kueue's certificate rotator fills this Secret (its install manifests create it empty).
    admin.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "kueue-webhook-server-cert",
                                                                    "namespace": NAMESPACE}}, exists_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    health_port = free_port()
    log_path = server.logs / "kueue.log"
    log = open(log_path, "wb")
    process = subprocess.Popen(
        [str(directory() / "bin" / "kueue"), f"--config={_config(work, health_port)}", "--zap-log-level=2"],
        env={**os.environ, "KUBECONFIG": str(server.admin_kubeconfig)}, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True)
    try:
        _mount_certificates(admin, work / "certs", process, log_path)
        _wait_ready(process, health_port, log_path)
        yield log_path
    finally:
        apiserver.stop(process)
        log.close()


def _mount_certificates(admin: Client, certs: pathlib.Path, process: subprocess.Popen, log: pathlib.Path) -> None:
    """Play the kubelet's part: Kueue writes its webhook certificate into the Secret, and reads it from the files a
    Secret volume would project into its certDir (it waits for them before it starts its controllers)."""
    def issued() -> dict[str, str] | None:
        if process.poll() is not None:
            raise RuntimeError(f"kueue exited ({process.returncode}); see {log}")
        data = (admin.get("Secret", NAMESPACE, "kueue-webhook-server-cert") or {}).get("data") or {}
        return data if {"tls.crt", "tls.key"} <= data.keys() else None

    data = wait_for("Kueue to issue its webhook certificate", issued, timeout=START_TIMEOUT)
    certs.mkdir(parents=True, exist_ok=True)
    for key, value in data.items():
        path = certs / key
        path.write_bytes(base64.b64decode(value))
        path.chmod(0o600)


def _wait_ready(process: subprocess.Popen, port: int, log: pathlib.Path) -> None:
    session = requests.Session()
    session.trust_env = False  # loopback only
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"kueue exited ({process.returncode}); see {log}")
        with contextlib.suppress(requests.RequestException):
            if session.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return
        time.sleep(0.5)
    raise RuntimeError(f"kueue not ready within {START_TIMEOUT:.0f}s; see {log}")

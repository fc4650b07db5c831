"""Fixtures of the e2e tests: a real cluster, the project image, the Helm release, MLflow, a CPU-budget launcher.

Which cluster (RINGLEADER_E2E_CLUSTER):
  harness (default)  the single-node cluster of cluster/harness.py, brought up if it is not (idempotent);
                     the image is built without Docker (cluster/build-image.sh, cached by content hash)
                     and imported into its containerd.
  kind               any other cluster, e.g. `make e2e-kind`'s: RINGLEADER_E2E_KUBECONFIG names its
                     kubeconfig; kubectl and helm come from PATH (or RINGLEADER_E2E_KUBECTL/_HELM);
                     the image must already be on the nodes (`kind load docker-image`).
Other knobs: RINGLEADER_E2E_IMAGE (default localhost/ringleader/ringleader:0.1.0), RINGLEADER_E2E_DOCKERFILE
(harness builds; default the project Dockerfile), RINGLEADER_E2E_SKIP_BUILD=1, RINGLEADER_E2E_NAMESPACE
(the release's, default ringleader-e2e), RINGLEADER_E2E_KEEP=1 (leave the release and the experiments).

The cluster is left up at the end (`make e2e` brings it down); the release and the test namespace go.
"""

from __future__ import annotations

import os
import pathlib
import secrets
import shutil
import sys
import tempfile
import time

import pytest
import yaml

import e2e_kube
import e2e_specs
from e2e_kube import Kube, log, wait_for
from e2e_mlflow import Mlflow, PortForward

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "ringleader"
IMAGE = os.environ.get("RINGLEADER_E2E_IMAGE", "localhost/ringleader/ringleader:0.1.0")
# The project image's content, with its steps ordered for buildah's vfs driver (see the file's header).
DOCKERFILE = os.environ.get("RINGLEADER_E2E_DOCKERFILE", str(ROOT / "Dockerfile"))
RELEASE = "e2e"
RELEASE_NAMESPACE = os.environ.get("RINGLEADER_E2E_NAMESPACE", "ringleader-e2e")
CLUSTER = os.environ.get("RINGLEADER_E2E_CLUSTER", "harness")
KEEP = os.environ.get("RINGLEADER_E2E_KEEP") == "1"

# MLflow client calls from the tests: bounded, few retries (its defaults retry for minutes).
os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")

TIMINGS: dict[str, float] = {}


def pytest_configure(config):
    e2e_kube._capture = config.pluginmanager.getplugin("capturemanager")


def pytest_collection_modifyitems(config, items):
    """Every e2e test gets the marker; the quick ones run first, training results last (they run meanwhile)."""
    order = {"test_validation.py": 0, "test_progress.py": 1, "test_faults.py": 1, "test_training.py": 2,
             "test_bandwidth.py": 2, "test_kueue.py": 2,
             # Last: a node taken away (and brought back) must hold no other test's pods, and the MLflow pod is
             # replaced or scaled to 0, once every other experiment has ended.
             "test_lost_node.py": 3, "test_mlflow_upgrade.py": 3, "test_mlflow_away.py": 3}
    here = pathlib.Path(__file__).resolve().parent
    # A plain `pytest` (testpaths = tests) must not start a cluster: e2e runs when asked for by path,
    # by `-m e2e`, or with RINGLEADER_E2E=1 (`make e2e` does all three).
    asked = (os.environ.get("RINGLEADER_E2E") == "1" or "e2e" in (config.getoption("markexpr") or "")
             or any(here == p or here in p.parents for p in
                    (pathlib.Path(str(a).split("::")[0]).resolve() for a in config.args)))
    skip = (pytest.mark.skip(reason="e2e tests run on a real cluster: `make e2e`, "
                                    "`pytest tests/e2e` or RINGLEADER_E2E=1"))
    for item in items:
        if here in pathlib.Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.e2e)
            # pyproject's 600 s would cut a cold first setup (cluster, image); every wait has its own bound.
            item.add_marker(pytest.mark.timeout(int(os.environ.get("RINGLEADER_E2E_TEST_TIMEOUT", "3600"))))
            if not asked:
                item.add_marker(skip)
    items.sort(key=lambda item: order.get(pathlib.Path(str(item.fspath)).name, 1) if "e2e" in item.keywords else -1)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if TIMINGS:
        terminalreporter.section("e2e timings (seconds)")
        for key, value in TIMINGS.items():
            terminalreporter.write_line(f"{key:<40} {value:8.1f}")


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)
    if report.when == "call":
        TIMINGS[f"test {item.name}"] = report.duration


class timed:
    def __init__(self, key: str):
        self.key = key

    def __enter__(self):
        self.start = time.monotonic()
        log(f"{self.key} ...")

    def __exit__(self, *exc):
        TIMINGS[self.key] = time.monotonic() - self.start
        log(f"{self.key}: {TIMINGS[self.key]:.1f}s{' (failed)' if exc[0] else ''}")


def _harness():
    sys.path.insert(0, str(ROOT / "cluster"))
    import harness

    return harness


@pytest.fixture(scope="session")
def kube() -> Kube:
    """The cluster under test, up and reachable."""
    if CLUSTER == "harness":
        harness = _harness()
        with timed("cluster up (harness.up)"):
            harness.up()
        kube = Kube(harness.env(), harness.kubectl_path(), harness.helm_path())
    else:
        kubeconfig = os.environ.get("RINGLEADER_E2E_KUBECONFIG")
        if not kubeconfig or not os.path.exists(kubeconfig):
            pytest.exit(f"RINGLEADER_E2E_CLUSTER={CLUSTER} needs RINGLEADER_E2E_KUBECONFIG (a kubeconfig file)", 2)
        kubectl = os.environ.get("RINGLEADER_E2E_KUBECTL") or shutil.which("kubectl")
        helm = os.environ.get("RINGLEADER_E2E_HELM") or shutil.which("helm")
        if not kubectl or not helm:
            pytest.exit("kubectl and helm must be on PATH (or RINGLEADER_E2E_KUBECTL / RINGLEADER_E2E_HELM)", 2)
        kube = Kube({**os.environ, "KUBECONFIG": kubeconfig}, kubectl, helm)
    wait_for("a Ready node", lambda: "True" in kube.kubectl(
        "get", "nodes", "-o", "jsonpath={.items[*].status.conditions[?(@.type=='Ready')].status}", check=False).stdout,
             180)
    return kube


# The tests of placement and of a lost node need this many schedulable nodes (make e2e E2E_NODES=3).
NODES_NEEDED = 3


@pytest.fixture(scope="module")
def nodes(kube) -> list[str]:
    """The cluster's schedulable nodes; a test that asks for them is skipped on fewer than NODES_NEEDED."""
    found = [n["metadata"]["name"] for n in kube.json("get", "nodes")["items"] if not n["spec"].get("unschedulable")]
    if len(found) < NODES_NEEDED:
        pytest.skip(f"needs a cluster of {NODES_NEEDED} nodes (make e2e E2E_NODES=3); this one has {len(found)}")
    return found


@pytest.fixture(scope="session")
def image(kube) -> str:
    """The project image on the cluster's nodes. harness: built (cached by content hash) and imported."""
    if CLUSTER == "harness" and os.environ.get("RINGLEADER_E2E_SKIP_BUILD") != "1":
        with timed("image build/import (cached)"):
            ref = _harness().build_image(DOCKERFILE, str(ROOT), IMAGE, timeout=3600)
        assert ref == IMAGE, f"build-image.sh answered {ref!r}, expected {IMAGE!r}"
    return IMAGE


# The harness has no volume provisioner: the MLflow claim binds to a PersistentVolume the session makes, of
# this class (no StorageClass object is needed for a static binding). kind's default class provisions one.
MLFLOW_STORAGE_CLASS = "ringleader-e2e-mlflow"
MLFLOW_VOLUME_SIZE = "1Gi"


def _values(image: str, home: str | None) -> dict:
    """The release's values: the chart's defaults (progress polling, MLflow on a claim) but for what a 2-core
    node and a local image need. `home`: the node the operator shares with MLflow's local volume, so that a
    test that stops another node of a multi-node cluster never takes either away."""
    repository, _, tag = image.rpartition(":")
    persistence = {"size": MLFLOW_VOLUME_SIZE}
    if CLUSTER == "harness":
        persistence["storageClassName"] = MLFLOW_STORAGE_CLASS
    return {
        "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
        "workers": {"imagePullPolicy": "Never"},
        "operator": {
            "resources": {"requests": {"cpu": "50m", "memory": "256Mi"}, "limits": {"memory": "768Mi"}},
            "logFormat": "plain",
            "verbose": True,
            # RINGLEADER_E2E_OPERATOR_ARGS: flags more, e.g. --no-admit-by-capacity to measure the operator without it.
            "extraArgs": ["--recheck-interval=10", *os.environ.get("RINGLEADER_E2E_OPERATOR_ARGS", "").split()],
            "nodeSelector": {"kubernetes.io/hostname": home} if home else {},
        },
        "tracking": {"timeoutSeconds": 10, "retrySeconds": 5},
        # test_kueue.py: Kueue runs beside the harness cluster (cluster/kueue-up.sh).
        "kueue": {"enabled": CLUSTER == "harness"},
        "mlflow": {
            "enabled": True,
            "workers": 1,
            # MLflow 3.17's server also starts a job runner with 7 huey consumers (~1.9 GB in all, measured):
            # the chart's default 1Gi limit gets it OOMKilled within a minute of load (see docs/e2e.md).
            "resources": {"requests": {"cpu": "50m", "memory": "512Mi"}, "limits": {"memory": "3Gi"}},
            "persistence": persistence,
        },
    }


@pytest.fixture(scope="session")
def mlflow_volume(kube):
    """harness: a `local` PersistentVolume for the chart's MLflow claim, on a directory of the node (this machine)
    owned by root and closed to others, so the non-root server writes it only through the pod's fsGroup, as on a
    freshly provisioned disk. Deleted with its directory at the end. kind: None (its default class provisions)."""
    if CLUSTER != "harness":
        yield None
        return
    host = pathlib.Path(tempfile.mkdtemp(prefix="ringleader-e2e-mlflow-"))  # 0700, root's
    node = kube.json("get", "nodes")["items"][0]["metadata"]["name"]
    volume = f"e2e-mlflow-{secrets.token_hex(3)}"
    kube.apply({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume}, "spec": {
        "capacity": {"storage": MLFLOW_VOLUME_SIZE}, "accessModes": ["ReadWriteOnce"],
        "storageClassName": MLFLOW_STORAGE_CLASS, "persistentVolumeReclaimPolicy": "Retain",
        "local": {"path": str(host)},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}},
        # Only the release's claim may bind it.
        "claimRef": {"namespace": RELEASE_NAMESPACE, "name": f"{RELEASE}-ringleader-mlflow"}}})
    yield {"name": volume, "path": host, "node": node}
    if KEEP:
        return
    kube.kubectl("delete", "pv", volume, "--ignore-not-found", "--wait=false", check=False)
    shutil.rmtree(host, ignore_errors=True)


@pytest.fixture(scope="session")
def release(kube, image, mlflow_volume, tmp_path_factory):
    """`helm install` of the chart with the in-cluster MLflow; uninstalled at the end (the cluster stays)."""
    values = tmp_path_factory.mktemp("helm") / "values.yaml"
    home = mlflow_volume["node"] if mlflow_volume else None
    values.write_text(yaml.safe_dump(_values(image, home)))
    if CLUSTER == "harness":
        with timed("Kueue up (cluster/kueue-up.sh)"):
            _harness().kueue_up()
    with timed("helm install (until operator and MLflow ready)"):
        # Helm installs crds/ only when they are absent: apply them so a changed CRD is never stale.
        kube.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CHART / "crds"))
        # Polled, not `kubectl wait`: on a CRD created a moment ago the API server may not have written any
        # condition yet, and `kubectl wait --for=condition` then fails at once (".status.conditions accessor
        # error: <nil>") instead of waiting.
        wait_for(f"crd/{e2e_kube.DTE} to be Established", lambda: any(
            c.get("type") == "Established" and c.get("status") == "True"
            for c in (kube.json("get", "crd", e2e_kube.DTE).get("status") or {}).get("conditions") or []), 60,
                 interval=1)
        kube.helm("upgrade", "--install", RELEASE, str(CHART), "-n", RELEASE_NAMESPACE, "--create-namespace",
                  "-f", str(values), "--timeout", "120s")
        deployments = [d["metadata"]["name"] for d in kube.json(
            "get", "deployments", "-n", RELEASE_NAMESPACE, "-l", f"app.kubernetes.io/instance={RELEASE}")["items"]]
        assert len(deployments) == 2, f"expected the operator and MLflow Deployments, found {deployments}"

        def ready():
            found = kube.json("get", "deployments", "-n", RELEASE_NAMESPACE, "-l",
                              f"app.kubernetes.io/instance={RELEASE}")["items"]
            return all((d.get("status") or {}).get("availableReplicas") == 1 for d in found)

        def pods():
            return "; ".join(f"{p['metadata']['name']}={p['status'].get('phase')} "
                             f"{[c.get('state') for c in p['status'].get('containerStatuses') or []]}"[:300]
                             for p in kube.pods(RELEASE_NAMESPACE, f"app.kubernetes.io/instance={RELEASE}"))

        wait_for("the operator and MLflow Deployments to be available", ready, 300, describe=pods)
    info = {
        "name": RELEASE,
        "chart": CHART,
        "values": values,
        "namespace": RELEASE_NAMESPACE,
        "operator": kube.json("get", "deployments", "-n", RELEASE_NAMESPACE, "-l",
                              "app.kubernetes.io/component=operator")["items"][0]["metadata"]["name"],
        "mlflow": kube.json("get", "services", "-n", RELEASE_NAMESPACE, "-l",
                            "app.kubernetes.io/component=mlflow")["items"][0]["metadata"]["name"],
    }
    yield info
    if KEEP:
        return
    with timed("helm uninstall"):
        result = kube.helm("uninstall", RELEASE, "-n", RELEASE_NAMESPACE, "--wait", "--timeout", "120s", check=False)
        if result.returncode != 0:
            log(f"helm uninstall: {result.stderr.strip()}")
        kube.kubectl("delete", "namespace", RELEASE_NAMESPACE, "--ignore-not-found", "--wait=true", "--timeout=120s",
                     timeout=150, check=False)


@pytest.fixture(scope="session")
def namespace(kube, release):
    """One namespace for every experiment of the run; deleted at the end (deletion never hangs: no finalizers)."""
    name = f"e2e-{secrets.token_hex(3)}"
    kube.kubectl("create", "namespace", name)
    wait_for("the default ServiceAccount", lambda: kube.get("serviceaccount", name, "default"), 60, interval=1)
    yield name
    if KEEP:
        return
    with timed("delete the test namespace"):
        kube.kubectl("delete", "namespace", name, "--wait=true", "--timeout=180s", timeout=200, check=False)


@pytest.fixture(scope="session")
def launcher(kube, namespace, release):
    budget = e2e_kube.free_cpu(kube) - 50
    log(f"free CPU on the node(s) after the release: {budget + 50}m")
    assert budget >= 750, f"the cluster has only {budget + 50}m CPU free; the e2e tests need at least 800m"
    running = e2e_kube.Launcher(kube, namespace, budget)
    yield running
    running.stop()


@pytest.fixture(scope="session")
def mlflow(kube, release):
    forward = PortForward(kube, release["namespace"], release["mlflow"], 5000)
    yield Mlflow(forward)
    forward.stop()


@pytest.fixture(scope="session")
def fleet(launcher, namespace):
    """The training experiments of test_training.py, submitted as soon as the session starts so that they
    run while the quicker tests do; each test then waits for its own."""
    manifests = e2e_specs.fleet(namespace)
    for manifest in manifests:
        launcher.submit(manifest, e2e_specs.cpu_cost(manifest))
    return {m["metadata"]["name"]: m for m in manifests}


# The ClusterQueue's CPU quota of examples/kueue-queue.yaml: one trial at a time, whatever its size.
KUEUE_QUOTA_CPU = 750


@pytest.fixture(scope="session")
def kueue_example(kube, launcher, namespace):
    """examples/kueue-queue.yaml as its header says: its queue objects, then the experiment, submitted when the
    session starts (its trials run one after the other, beside the other tests). The launcher books the
    ClusterQueue's quota for it: Kueue keeps its pods within that. The queue objects go at the end."""
    if CLUSTER != "harness":
        pytest.skip("Kueue runs beside the harness cluster only (cluster/kueue-up.sh)")
    queue, manifest = e2e_specs.kueue_example(namespace)
    for document in queue:
        kube.apply(document)
    wait_for("the example's ClusterQueue to be Active", lambda: any(
        c["type"] == "Active" and c["status"] == "True" for c in
        ((kube.get("clusterqueue", None, "research") or {}).get("status") or {}).get("conditions", [])), 60, interval=1)
    launcher.submit(manifest, KUEUE_QUOTA_CPU)
    yield manifest
    if KEEP:
        return
    for document in reversed(queue):
        kube.kubectl("delete", document["kind"].lower(), document["metadata"]["name"], "--ignore-not-found",
                     "--wait=false", *(("-n", namespace) if document["kind"] == "LocalQueue" else ()), check=False)


@pytest.fixture(scope="session", autouse=True)
def _start_background_experiments_early(request):
    """Submit the fleet and the Kueue example at the start of the session when any selected test uses them."""
    for fixture in ("fleet", "kueue_example") if CLUSTER == "harness" else ("fleet",):  # (the Kueue test skips)
        if any(fixture in item.fixturenames for item in request.session.items):
            request.getfixturevalue(fixture)


@pytest.fixture
def report_on_failure(request, kube, namespace, release):
    """`watch(name)`: on failure, print that experiment's status, pods' logs and the operator's log tail."""
    names: list[str] = []
    yield names.append
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        for name in names:
            try:
                print(f"==== experiment {name}\n" + e2e_kube.explain_failure(kube, namespace, name))
            except Exception as error:  # noqa: BLE001
                print(f"(cannot describe {name}: {error})")
        result = kube.kubectl("logs", "-n", release["namespace"], f"deploy/{release['operator']}", "--tail=80",
                              check=False)
        print("==== operator log (tail)\n" + result.stdout[-8000:])

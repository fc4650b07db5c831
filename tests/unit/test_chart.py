"""The Helm chart as rendered by helm: lint, golden output, schema errors, least-privilege RBAC, hardened pods.

helm comes from the cluster harness's build (cluster/build-tools.sh helm), $HELM, or PATH; without
it these tests are skipped with the command that builds it. Regenerate the golden files after an
intended change with RINGLEADER_UPDATE_GOLDEN=1.
"""

import argparse
import glob
import importlib.util
import os
import pathlib
import shutil
import subprocess

import pytest
import yaml

from ringleader.controller import cli as controller_cli
from ringleader.controller import settings as settings_

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "ringleader"
GOLDEN = pathlib.Path(__file__).resolve().parent / "test_chart_golden"
KUBE_VERSION = "1.34.0"
# Every configuration the golden files pin, by file name.
SCENARIOS = {
    "default.yaml": [],
    "namespaced-mlflow-podgroups.yaml": [
        "--set", "scope.mode=Namespace", "--set", "scope.namespaces={team-a,team-b}",
        "--set", "mlflow.enabled=true", "--set", "mlflow.persistence.enabled=true",
        "--set", "podGroups.enabled=true", "--set", "kueue.enabled=true",
        "--set", "workers.gpu.tolerations[0].key=nvidia.com/gpu",
        "--set", "workers.gpu.tolerations[0].operator=Exists",
    ],
    "guard-rails.yaml": [
        "--set", "guardRails.enabled=true", "--set", "guardRails.action=Warn",
        "--set", "guardRails.allowedImagePrefixes={registry.example.com/ml/,ghcr.io/lab/}",
        "--set", "guardRails.allowedPriorityClasses={research}",
        "--set", "guardRails.allowedTolerationKeys={nvidia.com/gpu}",
        "--set", "guardRails.maxWorkersPerExperiment=16",
        "--set-string", "guardRails.namespaceLabels.research=true",
    ],
}


def _harness_helm():
    spec = importlib.util.spec_from_file_location("harness", ROOT / "cluster" / "harness.py")
    if spec is None or not (ROOT / "cluster" / "harness.py").exists():
        return None
    harness = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(harness)
    return harness.helm_path()


@pytest.fixture(scope="session")
def helm():
    candidates = [os.environ.get("HELM"), _harness_helm(),
                  *sorted(glob.glob(os.path.expanduser("~/.cache/ringleader/cluster/helm-*/bin/helm"))),
                  shutil.which("helm")]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    pytest.skip("helm not found: build it with `cluster/build-tools.sh helm` (or set $HELM)")


def run_helm(helm, *args, check=True):
    result = subprocess.run([helm, *args], capture_output=True, text=True, timeout=120)
    if check:
        assert result.returncode == 0, result.stderr
    return result


def template(helm, *args, release="rl", namespace="ringleader"):
    text = run_helm(helm, "template", release, str(CHART), "--namespace", namespace,
                    "--kube-version", KUBE_VERSION, *args).stdout
    return text, [d for d in yaml.safe_load_all(text) if d]


def objects(documents, kind):
    return [d for d in documents if d["kind"] == kind]


# -- lint and golden output ------------------------------------------------------------------------

@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_the_chart_lints_strictly(helm, scenario):
    run_helm(helm, "lint", "--strict", "--kube-version", KUBE_VERSION, str(CHART), *SCENARIOS[scenario])


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_the_rendered_chart_matches_its_golden_file(helm, scenario):
    text, _ = template(helm, *SCENARIOS[scenario])
    golden = GOLDEN / scenario
    if os.environ.get("RINGLEADER_UPDATE_GOLDEN"):
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(text)
    assert golden.exists(), f"{golden} is missing: run with RINGLEADER_UPDATE_GOLDEN=1"
    assert text == golden.read_text(), "rendering changed; if intended, rerun with RINGLEADER_UPDATE_GOLDEN=1"


# -- the schema refuses bad values with a clear error ---------------------------------------------------

@pytest.mark.parametrize("setting, error", [
    ("operator.replicas=2", "at '/operator': additional properties 'replicas' not allowed"),
    ("scope.mode=Everywhere", "at '/scope/mode': value must be one of 'Cluster', 'Namespace'"),
    ("operator.healthPort=http", "at '/operator/healthPort': got string, want integer"),
    ("mlflow.persistence.size=lots", "at '/mlflow/persistence/size'"),
])
def test_the_schema_refuses_bad_values_naming_the_value(helm, setting, error):
    result = run_helm(helm, "template", "rl", str(CHART), "--kube-version", KUBE_VERSION, "--set", setting, check=False)
    assert result.returncode != 0
    assert error in result.stderr


# -- RBAC: least privilege --------------------------------------------------------------------------

# Every verb the operator uses, by resource (controller/kube.py and kopf's watching and posting).
ALLOWED = {
    "distributedtrainingexperiments": {"get", "list", "watch", "delete"},
    "distributedtrainingexperiments/status": {"patch"},
    "distributedtrainingexperiments/finalizers": {"update"},
    "pods": {"list", "watch", "create", "delete"},
    "pods/log": {"get"},
    "services": {"create"},
    "configmaps": {"create"},
    "events": {"create"},
    "podgroups": {"create"},
    "workloads": {"list", "watch", "create", "delete"},
    "workloads/status": {"patch"},
    "customresourcedefinitions": {"list", "watch"},
    "nodes": {"list"},  # admission by free capacity reads them, cluster-wide mode only
}


def rules_of(documents, kind):
    return [rule for role in objects(documents, kind) for rule in role["rules"]]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_rbac_has_no_wildcard_and_only_the_verbs_the_operator_uses(helm, scenario):
    _, documents = template(helm, *SCENARIOS[scenario])
    rules = rules_of(documents, "ClusterRole") + rules_of(documents, "Role")
    assert rules
    for rule in rules:
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[field], f"wildcard in {rule}"
        for resource in rule["resources"]:
            assert set(rule["verbs"]) <= ALLOWED[resource], f"{resource}: {rule['verbs']}"


def test_cluster_mode_binds_a_cluster_role_and_never_reads_secrets_or_namespaces(helm):
    _, documents = template(helm)
    assert [d["kind"] for d in documents if d["kind"].endswith(("Role", "RoleBinding"))] == ["ClusterRole",
                                                                                             "ClusterRoleBinding"]
    resources = {r for rule in rules_of(documents, "ClusterRole") for r in rule["resources"]}
    assert "secrets" not in resources and "namespaces" not in resources and "podgroups" not in resources
    assert "workloads" not in resources  # Kueue is off by default
    nodes = [rule for rule in rules_of(documents, "ClusterRole") if "nodes" in rule["resources"]]
    assert [rule["verbs"] for rule in nodes] == [["list"]]  # read only: admission by free capacity


def test_namespace_mode_uses_only_roles_one_per_namespace_and_podgroups_when_enabled(helm):
    _, documents = template(helm, *SCENARIOS["namespaced-mlflow-podgroups.yaml"])
    assert objects(documents, "ClusterRole") == [] and objects(documents, "ClusterRoleBinding") == []
    assert sorted(r["metadata"]["namespace"] for r in objects(documents, "Role")) == ["team-a", "team-b"]
    assert sorted(b["metadata"]["namespace"] for b in objects(documents, "RoleBinding")) == ["team-a", "team-b"]
    assert all(any("podgroups" in rule["resources"] for rule in role["rules"]) for role in objects(documents, "Role"))
    assert all(any("workloads" in rule["resources"] for rule in role["rules"]) for role in objects(documents, "Role"))
    resources = {r for role in objects(documents, "Role") for rule in role["rules"] for r in rule["resources"]}
    assert "customresourcedefinitions" not in resources
    assert "nodes" not in resources  # cluster-scoped: namespace mode has no admission by capacity


# -- the operator Deployment ------------------------------------------------------------------------

def operator_of(documents):
    (deployment,) = [d for d in objects(documents, "Deployment")
                     if d["metadata"]["labels"]["app.kubernetes.io/component"] == "operator"]
    return deployment


def test_the_operator_runs_one_replica_replaced_not_rolled(helm):
    deployment = operator_of(template(helm)[1])
    assert (deployment["spec"]["replicas"], deployment["spec"]["strategy"]) == (1, {"type": "Recreate"})


def test_every_container_of_the_chart_is_non_root_read_only_without_capabilities(helm):
    _, documents = template(helm, *SCENARIOS["namespaced-mlflow-podgroups.yaml"])
    deployments = objects(documents, "Deployment")
    assert len(deployments) == 2
    for deployment in deployments:
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for container in pod["containers"]:
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True
            assert context["allowPrivilegeEscalation"] is False
            assert context["capabilities"] == {"drop": ["ALL"]}
            assert context["seccompProfile"] == {"type": "RuntimeDefault"}
            assert "requests" in container["resources"]


def test_the_operator_args_are_the_controllers_flags_and_carry_the_values(helm):
    _, documents = template(helm, *SCENARIOS["namespaced-mlflow-podgroups.yaml"])
    container = operator_of(documents)["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][0] == "operator"
    parser = argparse.ArgumentParser()
    controller_cli.add_arguments(parser)
    settings = settings_.from_args(parser.parse_args(container["args"][1:]))
    assert settings.scope.namespaces == ("team-a", "team-b")
    assert settings.pods.pod_groups is True
    assert settings.pods.kueue is True
    assert settings.pods.render.gpu_tolerations == ({"key": "nvidia.com/gpu", "operator": "Exists"},)
    assert settings.pods.render.image == "localhost/ringleader/ringleader:0.1.0"
    assert settings.tracking.default_uri == "http://rl-ringleader-mlflow.ringleader.svc.cluster.local:5000"
    # The liveness probe asks the port kopf's endpoint listens on.
    port = int(settings.liveness_endpoint.rsplit(":", 1)[1].split("/")[0])
    probe = container["livenessProbe"]["httpGet"]
    assert probe["path"] == "/healthz"
    assert {p["name"]: p["containerPort"] for p in container["ports"]}[probe["port"]] == port


def test_names_are_truncated_to_63_characters_keeping_component_suffixes(helm):
    release = "a-release-of-fifty-three-characters-for-a-research-lab"[:53]  # helm's longest release name
    _, documents = template(helm, "--set", "mlflow.enabled=true", *SCENARIOS["guard-rails.yaml"], release=release)
    names = {d["metadata"]["name"] for d in documents}
    assert all(len(name) <= 63 for name in names)
    operator = f"{release}-ringleader"[:63]
    mlflow = f"{release}-ringleader"[:63 - len("-mlflow")].rstrip("-") + "-mlflow"
    guard_rails = f"{release}-ringleader"[:63 - len("-guard-rails")].rstrip("-") + "-guard-rails"
    assert names == {operator, mlflow, guard_rails}


# -- the optional MLflow server -----------------------------------------------------------------------

def mlflow_of(documents):
    return next(d for d in objects(documents, "Deployment") if d["metadata"]["name"].endswith("-mlflow"))


def notes(helm, tmp_path, *args):
    """The install notes as `helm install` prints them: `helm template` leaves NOTES.txt out, so a copy of the
    chart carries one more template that includes it."""
    copy = tmp_path / "chart"
    shutil.copytree(CHART, copy)
    (copy / "templates" / "notes.yaml").write_text('notes: {{ include "ringleader/templates/NOTES.txt" . | toJson }}\n')
    text = run_helm(helm, "template", "rl", str(copy), "--namespace", "ringleader", "--kube-version", KUBE_VERSION,
                    "--show-only", "templates/notes.yaml", *args).stdout
    return yaml.safe_load(text)["notes"]


def test_mlflow_serves_artifacts_and_accepts_its_service_names(helm):
    _, documents = template(helm, "--set", "mlflow.enabled=true")
    (service,) = objects(documents, "Service")
    container = mlflow_of(documents)["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    assert "--serve-artifacts" in args
    allowed = next(a for a in args if a.startswith("--allowed-hosts=")).split("=", 1)[1].split(",")
    name = service["metadata"]["name"]
    assert {name, f"{name}.ringleader", f"{name}.ringleader.svc.cluster.local:*", "localhost:*"} <= set(allowed)


def test_mlflow_keeps_its_runs_on_a_claim_by_default_writable_by_its_non_root_user(helm, tmp_path):
    _, documents = template(helm, "--set", "mlflow.enabled=true")
    mlflow = mlflow_of(documents)
    pod = mlflow["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert {"name": "MLFLOW_BACKEND_STORE_URI", "value": "sqlite:////mlflow/mlflow.db"} in container["env"]
    assert "--artifacts-destination=/mlflow/artifacts" in container["args"]
    assert {"name": "data", "mountPath": "/mlflow"} in container["volumeMounts"]
    (claim,) = objects(documents, "PersistentVolumeClaim")
    assert pod["volumes"][0] == {"name": "data", "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]}}
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert claim["spec"] == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}
    # The server runs as 1000 with a read-only root: the volume is its only writable place, through fsGroup.
    assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["fsGroup"]) == (1000, 1000)
    assert pod["securityContext"]["fsGroupChangePolicy"] == "OnRootMismatch"
    assert mlflow["spec"]["strategy"] == {"type": "Recreate"}  # one writer of a ReadWriteOnce volume at a time
    assert f"on the claim {claim['metadata']['name']}" in notes(helm, tmp_path, "--set", "mlflow.enabled=true")


def test_mlflow_claims_the_named_class_or_mounts_an_existing_claim(helm):
    _, documents = template(helm, "--set", "mlflow.enabled=true", "--set", "mlflow.persistence.storageClassName=local")
    (claim,) = objects(documents, "PersistentVolumeClaim")
    assert claim["spec"]["storageClassName"] == "local"
    _, documents = template(helm, "--set", "mlflow.enabled=true", "--set", "mlflow.persistence.existingClaim=runs")
    assert objects(documents, "PersistentVolumeClaim") == []
    assert (mlflow_of(documents)["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]
            == {"claimName": "runs"})


def test_mlflow_without_persistence_is_an_empty_dir_and_the_notes_warn(helm, tmp_path):
    setting = ("--set", "mlflow.enabled=true", "--set", "mlflow.persistence.enabled=false")
    _, documents = template(helm, *setting)
    assert objects(documents, "PersistentVolumeClaim") == []
    assert mlflow_of(documents)["spec"]["template"]["spec"]["volumes"][0] == {"name": "data", "emptyDir": {}}
    assert "WARNING: mlflow.persistence.enabled is false" in notes(helm, tmp_path, *setting)


def test_mlflow_takes_its_database_uri_from_a_secret_and_its_artifact_store_from_values(helm, tmp_path):
    setting = ("--set", "mlflow.enabled=true", "--set", "mlflow.backendStore.existingSecret=db",
               "--set", "mlflow.artifacts.destination=s3://ml/mlflow", "--set", "mlflow.artifacts.credentialsSecret=s3")
    text, documents = template(helm, *setting)
    container = mlflow_of(documents)["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["MLFLOW_BACKEND_STORE_URI"]["valueFrom"] == {"secretKeyRef": {"name": "db", "key": "uri"}}
    assert "--backend-store-uri=$(MLFLOW_BACKEND_STORE_URI)" in container["args"]  # expanded by the kubelet
    assert "--artifacts-destination=s3://ml/mlflow" in container["args"]
    assert container["envFrom"] == [{"secretRef": {"name": "s3"}}]
    # Nothing is kept on the pod, so nothing is claimed.
    assert objects(documents, "PersistentVolumeClaim") == []
    assert "sqlite" not in text
    assert "database of Secret db and artifacts at s3://ml/mlflow" in notes(helm, tmp_path, *setting)


@pytest.mark.parametrize("setting, error", [
    # A database URI holds a password: it is never a value (values are kept in the release's history).
    ("mlflow.backendStore.uri=postgresql://mlflow:secret@db/mlflow", "additional properties 'uri' not allowed"),
    ("mlflow.artifacts.destination=s3://key:secret@ml/mlflow", "does not match pattern"),
])
def test_the_schema_refuses_credentials_in_mlflow_values(helm, setting, error):
    result = run_helm(helm, "template", "rl", str(CHART), "--kube-version", KUBE_VERSION, "--set",
                      "mlflow.enabled=true",
                      "--set", setting, check=False)
    assert result.returncode != 0 and error in result.stderr, result.stderr


def test_mlflow_pod_annotations_change_only_the_mlflow_pod(helm):
    _, before = template(helm, "--set", "mlflow.enabled=true")
    _, after = template(helm, "--set", "mlflow.enabled=true", "--set-string", "mlflow.podAnnotations.rollme=1")
    assert mlflow_of(after)["spec"]["template"]["metadata"]["annotations"] == {"rollme": "1"}
    assert operator_of(after) == operator_of(before)


# -- the optional guard rails (tests/operator/test_guard_rails.py shows the API server enforcing them) --------

def test_guard_rails_are_off_by_default_and_need_a_limit_when_on(helm):
    _, documents = template(helm)
    assert [d for d in documents if d["kind"].startswith("ValidatingAdmissionPolicy")] == []
    result = run_helm(helm, "template", "rl", str(CHART), "--kube-version", KUBE_VERSION,
                      "--set", "guardRails.enabled=true", check=False)
    assert result.returncode != 0
    assert "guardRails.enabled is true but no limit is set: set guardRails.allowedImagePrefixes" in result.stderr


def test_guard_rails_carry_the_values_into_the_policy_and_its_binding(helm):
    _, documents = template(helm, *SCENARIOS["guard-rails.yaml"])
    (policy,) = objects(documents, "ValidatingAdmissionPolicy")
    (binding,) = objects(documents, "ValidatingAdmissionPolicyBinding")
    variables = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}
    # Each list of values is a CEL list literal (the JSON of the list).
    assert yaml.safe_load(variables["imagePrefixes"]) == ["registry.example.com/ml/", "ghcr.io/lab/"]
    assert yaml.safe_load(variables["priorityClasses"]) == ["research"]
    assert yaml.safe_load(variables["tolerationKeys"]) == ["nvidia.com/gpu"]
    checks = [v["expression"] for v in policy["spec"]["validations"]]
    assert len(checks) == 4 and checks[-1].endswith("<= 16")
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Warn"],
                               "matchResources": {"namespaceSelector": {"matchLabels": {"research": "true"}}}}


def test_guard_rails_check_only_the_limits_that_are_set(helm):
    _, documents = template(helm, "--set", "guardRails.enabled=true", "--set", "guardRails.maxWorkersPerExperiment=4")
    (policy,) = objects(documents, "ValidatingAdmissionPolicy")
    assert [v["expression"] for v in policy["spec"]["validations"]] == [
        "variables.largestTrial * variables.parallelTrials <= 4"]
    (binding,) = objects(documents, "ValidatingAdmissionPolicyBinding")
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}


def test_the_chart_renders_with_helms_own_default_kubernetes_version(helm):
    # A released helm is stamped with the Kubernetes version its client speaks (the cluster harness stamps its
    # build the same way); an unstamped one assumes 1.20 and refuses the chart's kubeVersion.
    result = run_helm(helm, "template", "rl", str(CHART), check=False)
    assert result.returncode == 0, result.stderr
    assert "kind: Deployment" in result.stdout


def test_the_operators_mlflow_credentials_come_from_a_secret_and_allowed_servers_become_flags(helm):
    _, documents = template(helm, "--set", "tracking.uri=https://mlflow.example", "--set",
                            "tracking.credentialsSecret=operator-mlflow", "--set",
                            "tracking.allowedUris={https://mlflow.team-a.example,http://10.0.0.7:5000}")
    container = operator_of(documents)["spec"]["template"]["spec"]["containers"][0]
    assert container["envFrom"] == [{"secretRef": {"name": "operator-mlflow"}}]
    parser = argparse.ArgumentParser()
    controller_cli.add_arguments(parser)
    settings = settings_.from_args(parser.parse_args(container["args"][1:]))
    assert settings.tracking.default_uri == "https://mlflow.example"
    assert settings.tracking.allowed_uris == ("https://mlflow.team-a.example", "http://10.0.0.7:5000")
    _, plain = template(helm)
    assert "envFrom" not in operator_of(plain)["spec"]["template"]["spec"]["containers"][0]

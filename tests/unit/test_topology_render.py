"""A trial renders into a headless Service, a ConfigMap with the trial, an optional PodGroup and one Pod per pod of
ranks."""

from __future__ import annotations

import json
import re
import shutil

import jinja2
import pytest
import yaml

from ringleader import api, topology
from ringleader.api import constants
from ringleader.api import trial as trial_
from ringleader.contract import environment as contract
from ringleader.topology import gang, rendering

SETTINGS = topology.RenderSettings(image="ringleader:test", default_tracking_uri="http://mlflow.test:5000")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS_1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@pytest.fixture
def trial_of(experiment_document):
    def make(spec, name="demo", index=0) -> api.Trial:
        return api.expand(api.parse(experiment_document(spec, name=name))).trials[index]
    return make


def by_kind(objects, kind):
    return [o for o in objects if o["kind"] == kind]


def container(pod):
    [only] = pod["spec"]["containers"]
    return only


def env_of(pod) -> dict[str, str]:
    """The pod's literal variables (the node's name comes from the downward API: `test_each_rank_is_told_its_node`)."""
    return {item["name"]: item["value"] for item in container(pod)["env"] if "value" in item}


def test_objects_come_in_creation_order(trial_of):
    objects = topology.render(trial_of({"parameterServers": {"replicas": 2}, "workers": {"replicas": 3}}), SETTINGS)
    assert [o["kind"] for o in objects] == ["Service", "ConfigMap"] + ["Pod"] * 5
    assert [o["metadata"]["name"] for o in by_kind(objects, "Pod")] == [
        "demo-0-ps-0", "demo-0-ps-1", "demo-0-worker-0", "demo-0-worker-1", "demo-0-worker-2"]


def test_the_service_is_headless_and_selects_exactly_the_trials_pods(trial_of):
    objects = topology.render(trial_of({"architecture": "PeerToPeer"}), SETTINGS)
    [service] = by_kind(objects, "Service")
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["ports"] == [
        {"name": "rendezvous", "port": contract.DEFAULT_MASTER_PORT, "targetPort": contract.DEFAULT_MASTER_PORT}]
    selector = service["spec"]["selector"]
    assert selector == {constants.LABEL_EXPERIMENT: "demo", constants.LABEL_TRIAL: "demo-0"}
    for pod in by_kind(objects, "Pod"):
        assert selector.items() <= pod["metadata"]["labels"].items()
        assert pod["spec"]["subdomain"] == service["metadata"]["name"]


def test_the_config_map_holds_the_trial_every_pod_mounts(trial_of):
    trial = trial_of({"architecture": "RingAllReduce", "sync": {"paradigm": "BSP"}})
    objects = topology.render(trial, SETTINGS)
    [config_map] = by_kind(objects, "ConfigMap")
    assert api.Trial.model_validate_json(config_map["data"][contract.TRIAL_FILE_NAME]) == trial
    for pod in by_kind(objects, "Pod"):
        [volume] = [v for v in pod["spec"]["volumes"] if "configMap" in v]
        assert volume["configMap"]["name"] == config_map["metadata"]["name"]
        [mount] = [m for m in container(pod)["volumeMounts"] if m["name"] == volume["name"]]
        assert mount == {"name": volume["name"], "mountPath": contract.TRIAL_MOUNT_DIR, "readOnly": True}


def test_each_pods_environment_is_exactly_the_contract(trial_of):
    trial = trial_of({"parameterServers": {"replicas": 1}, "workers": {"replicas": 2}})
    pods = by_kind(topology.render(trial, SETTINGS, run_id="run-42"), "Pod")
    for pod, slot in zip(pods, trial.slots(), strict=True):
        expected = contract.PodEnvironment(
            role=slot.role, rank=slot.rank, world_size=3, master_addr="ps-0.demo-0",
            master_port=contract.DEFAULT_MASTER_PORT, trial_file="/etc/ringleader/trial.json",
            output_dir=contract.POD_OUTPUT_DIR, run_id="run-42", tracking_uri="http://mlflow.test:5000")
        assert env_of(pod) == expected.to_environ()
        assert contract.PodEnvironment.from_environ(env_of(pod)) == expected
        assert pod["spec"]["hostname"] == slot.hostname


def test_a_pod_of_several_ranks_gets_its_agents_environment_from_which_each_rank_gets_its_own(trial_of):
    trial = trial_of({"architecture": "ParameterServer", "workers": {"replicas": 4, "ranksPerPod": 2}})
    objects = topology.render(trial, SETTINGS)
    pods = by_kind(objects, "Pod")
    assert [p["metadata"]["name"] for p in pods] == ["demo-0-ps-0", "demo-0-worker-0", "demo-0-worker-1"]
    for pod, ranks in zip(pods, trial.pods(), strict=True):
        env = contract.PodEnvironment.from_environ(env_of(pod))
        assert env.is_agent == (len(ranks) > 1) and env.local_world_size == len(ranks)
        assert (env.rank, env.group_rank) == (ranks[0].rank, ranks[0].group_rank)
        assert pod["metadata"]["labels"][constants.LABEL_LOCAL_WORLD_SIZE] == str(len(ranks))
        for slot in ranks:  # what the pod's agent gives each of its ranks
            told = contract.PodEnvironment.from_environ(env.of_local_rank(slot.local_rank, "/tmp/t").to_environ())
            assert (told.rank, told.local_rank, told.local_world_size, told.group_rank, told.is_agent) == (
                slot.rank, slot.local_rank, slot.local_world_size, slot.group_rank, False)
    assert env_of(pods[2])[contract.NODE_RANK] == env_of(pods[2])[contract.GROUP_RANK] == "2"


def test_a_rank_outside_its_pod_is_refused_by_the_contract(trial_of):
    pod = by_kind(topology.render(trial_of({"workers": {"replicas": 4, "ranksPerPod": 2}}), SETTINGS), "Pod")[1]
    with pytest.raises(contract.ContractError, match="LOCAL_RANK=2 must be in"):
        contract.PodEnvironment.from_environ({**env_of(pod), contract.LOCAL_RANK: "2"})
    with pytest.raises(contract.ContractError, match="ranks of the pod exceed WORLD_SIZE=5"):
        contract.PodEnvironment.from_environ({**env_of(pod), contract.RANK: "4"})


def test_each_rank_is_told_its_node_by_the_downward_api(trial_of):
    for pod in by_kind(topology.render(trial_of({}), SETTINGS), "Pod"):
        [node] = [item for item in container(pod)["env"] if item["name"] == contract.NODE_NAME]
        assert node == {"name": "RINGLEADER_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}


def test_a_restarted_trials_pods_are_told_their_attempt_which_a_first_attempt_leaves_unsaid(trial_of):
    trial = trial_of({"workers": {"replicas": 2}})
    assert all(contract.ATTEMPT not in env_of(pod) for pod in by_kind(topology.render(trial, SETTINGS), "Pod"))
    for pod in by_kind(topology.render(trial, SETTINGS, attempt=3), "Pod"):
        assert contract.PodEnvironment.from_environ(env_of(pod)).attempt == 3
    with pytest.raises(contract.ContractError, match="RINGLEADER_ATTEMPT=0 must be 1 or more"):
        contract.PodEnvironment.from_environ({**env_of(by_kind(topology.render(trial, SETTINGS), "Pod")[0]),
                                              contract.ATTEMPT: "0"})


def test_pods_made_before_their_run_exists_get_the_token_to_find_it_by_and_never_both(trial_of):
    trial = trial_of({"workers": {"replicas": 2}})
    for pod in by_kind(topology.render(trial, SETTINGS, run_token="uid-1.demo-0"), "Pod"):
        env = contract.PodEnvironment.from_environ(env_of(pod))
        assert (env.run_id, env.run_token, env.mlflow_experiment) == (None, "uid-1.demo-0", "default/demo")
        assert env.publishes
    for pod in by_kind(topology.render(trial, SETTINGS, run_id="run-42", run_token="uid-1.demo-0"), "Pod"):
        assert contract.RUN_TOKEN not in env_of(pod) and contract.MLFLOW_EXPERIMENT not in env_of(pod)


def test_a_run_token_that_could_change_an_mlflow_search_is_refused(trial_of):
    env = env_of(by_kind(topology.render(trial_of({}), SETTINGS, run_token="uid-1.demo-0"), "Pod")[0])
    with pytest.raises(contract.ContractError, match="RINGLEADER_MLFLOW_RUN_TOKEN"):
        contract.PodEnvironment.from_environ({**env, contract.RUN_TOKEN: "x' OR tags.a = 'b"})


def test_rank_zero_hosts_the_rendezvous_in_every_architecture(trial_of):
    for architecture, first in (("ParameterServer", "ps-0"), ("PeerToPeer", "worker-0"), ("RingAllReduce", "worker-0")):
        pods = by_kind(topology.render(trial_of({"architecture": architecture}), SETTINGS), "Pod")
        assert {env_of(p)["MASTER_ADDR"] for p in pods} == {f"{first}.demo-0"}
        assert pods[0]["spec"]["hostname"] == first and env_of(pods[0])["RANK"] == "0"


def test_the_experiments_tracking_uri_wins_and_none_leaves_it_out(trial_of):
    trial = trial_of({"tracking": {"uri": "http://mine:5000"}})
    assert env_of(by_kind(topology.render(trial, SETTINGS), "Pod")[0])[contract.TRACKING_URI] == "http://mine:5000"
    bare = by_kind(topology.render(trial_of({}), topology.RenderSettings()), "Pod")[0]
    assert contract.TRACKING_URI not in env_of(bare) and contract.RUN_ID not in env_of(bare)


def test_pods_run_the_runtime_once_and_are_not_restarted_alone(trial_of):
    for pod in by_kind(topology.render(trial_of({}), SETTINGS), "Pod"):
        assert pod["spec"]["restartPolicy"] == "Never"
        assert container(pod)["command"] == ["python", "-m", "ringleader.runtime"]
        assert container(pod)["image"] == "ringleader:test"
        assert container(pod)["imagePullPolicy"] == "IfNotPresent"
        assert container(pod)["terminationMessagePolicy"] == "FallbackToLogsOnError"
        assert pod["spec"]["enableServiceLinks"] is False
        assert pod["spec"]["automountServiceAccountToken"] is False
        assert "serviceAccountName" not in pod["spec"]


def test_the_experiments_image_wins_over_the_settings(trial_of):
    pod = by_kind(topology.render(trial_of({"image": "registry.example/me/train:1"}), SETTINGS), "Pod")[0]
    assert container(pod)["image"] == "registry.example/me/train:1"


def test_pods_are_locked_down(trial_of):
    for pod in by_kind(topology.render(trial_of({}), SETTINGS), "Pod"):
        assert pod["spec"]["securityContext"] == {
            "runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000,
            "seccompProfile": {"type": "RuntimeDefault"}}
        assert container(pod)["securityContext"] == {
            "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}
        # The read-only root needs one writable place, which holds the outputs.
        assert {"name": "tmp", "mountPath": "/tmp"} in container(pod)["volumeMounts"]
        # Bounded, like the pod's whole local disk: a runaway factory cannot fill the node and evict others.
        assert {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}} in pod["spec"]["volumes"]
        resources = container(pod)["resources"]
        assert resources["requests"]["ephemeral-storage"] == resources["limits"]["ephemeral-storage"] == "1Gi"
        assert contract.POD_OUTPUT_DIR.startswith("/tmp/")


def test_requests_equal_limits_and_gpus_use_the_configured_resource_name(trial_of):
    trial = trial_of({"parameterServers": {"resources": {"cpu": "500m", "memory": "1Gi"}},
                      "workers": {"resources": {"cpu": "4", "memory": "16Gi", "gpu": 2}}})
    settings = topology.RenderSettings(gpu_resource_name="amd.com/gpu", scratch_limit="3Gi")
    ps, worker = by_kind(topology.render(trial, settings), "Pod")  # 2 GPUs a pod: one rank each, both in one pod
    ps_resources = {"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "3Gi"}
    assert container(ps)["resources"] == {"requests": ps_resources, "limits": ps_resources}
    worker_resources = {"cpu": "4", "memory": "16Gi", "ephemeral-storage": "3Gi", "amd.com/gpu": 2}
    assert container(worker)["resources"] == {"requests": worker_resources, "limits": worker_resources}
    assert {"name": "tmp", "emptyDir": {"sizeLimit": "3Gi"}} in worker["spec"]["volumes"]


def test_gpu_ring_pods_get_a_memory_backed_shared_memory(trial_of):
    gpu = by_kind(topology.render(trial_of({"architecture": "RingAllReduce", "workers": {"resources": {"gpu": 1}}}),
                                  SETTINGS), "Pod")[0]
    assert {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}} in gpu["spec"]["volumes"]
    assert {"name": "shm", "mountPath": "/dev/shm"} in container(gpu)["volumeMounts"]
    cpu = by_kind(topology.render(trial_of({"architecture": "RingAllReduce"}), SETTINGS), "Pod")[0]
    assert all(v["name"] != "shm" for v in cpu["spec"]["volumes"])


def test_credentials_come_from_the_secret_and_nowhere_else(trial_of):
    objects = topology.render(trial_of({"tracking": {"credentialsSecret": {"name": "mlflow-auth"}}}), SETTINGS)
    for pod in by_kind(objects, "Pod"):
        assert container(pod)["envFrom"] == [{"secretRef": {"name": "mlflow-auth"}}]
    assert "envFrom" not in container(by_kind(topology.render(trial_of({}), SETTINGS), "Pod")[0])


def test_scheduling_and_worker_groups_place_pods(trial_of):
    trial = trial_of({
        "parameterServers": {"replicas": 1},
        "workers": {"replicas": 2, "groups": [{"name": "fast", "replicas": 1},
                                              {"name": "slow", "replicas": 1, "nodeSelector": {"zone": "b"}}]},
        "scheduling": {"schedulerName": "my-scheduler", "priorityClassName": "research",
                       "nodeSelector": {"pool": "train"},
                       "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ml",
                                        "effect": "NoSchedule"}]}})
    ps, fast, slow = by_kind(topology.render(trial, SETTINGS), "Pod")
    assert ps["spec"]["nodeSelector"] == {"pool": "train"}
    assert slow["spec"]["nodeSelector"] == {"pool": "train", "zone": "b"}
    for pod in (ps, fast, slow):
        assert pod["spec"]["schedulerName"] == "my-scheduler"
        assert pod["spec"]["priorityClassName"] == "research"
        assert pod["spec"]["tolerations"] == [{"key": "dedicated", "operator": "Equal", "value": "ml",
                                               "effect": "NoSchedule"}]
    assert slow["metadata"]["labels"][constants.LABEL_WORKER_GROUP] == "slow"
    assert constants.LABEL_WORKER_GROUP not in ps["metadata"]["labels"]


def test_every_object_carries_the_trials_labels_and_pods_their_rank(trial_of):
    trial = trial_of({"sweep": {"matrix": {"workers": [1, 3]}}}, index=1)
    objects = topology.render(trial, SETTINGS, run_id="abc")
    for item in objects:
        labels = item["metadata"]["labels"]
        assert labels[constants.LABEL_EXPERIMENT] == "demo"
        assert labels[constants.LABEL_TRIAL] == "demo-1"
        assert labels[constants.LABEL_TRIAL_INDEX] == "1"
        assert labels[constants.LABEL_MANAGED_BY] == "ringleader"
        assert item["metadata"]["namespace"] == "default"
    for rank, pod in enumerate(by_kind(objects, "Pod")):
        assert pod["metadata"]["labels"][constants.LABEL_RANK] == str(rank)
        assert pod["metadata"]["labels"][constants.LABEL_ROLE] == ("ps" if rank == 0 else "worker")
        assert pod["metadata"]["annotations"][constants.ANNOTATION_MLFLOW_RUN_ID] == "abc"
        assert json.loads(pod["metadata"]["annotations"][constants.ANNOTATION_TRIAL_PARAMETERS]) == {"workers": "3"}


def test_long_and_odd_experiment_names_give_valid_names_and_labels(trial_of):
    name = "study." + "x" * 240
    trial = trial_of({"architecture": "RingAllReduce", "workers": {"replicas": 3}}, name=name)
    objects = topology.render(trial, SETTINGS)
    for item in objects:
        assert len(item["metadata"]["name"]) <= constants.MAX_NAME_LENGTH
        assert DNS_1123_SUBDOMAIN.match(item["metadata"]["name"])
        for value in item["metadata"]["labels"].values():
            assert len(value) <= constants.MAX_NAME_LENGTH and LABEL_VALUE.match(value), value
    [service] = by_kind(objects, "Service")
    assert DNS_1035.match(service["metadata"]["name"])


def test_the_largest_trial_still_has_names_within_63_characters():
    # The longest pod-name suffix a trial can have, "-worker-1023", is what MAX_TRIAL_NAME leaves room for.
    trial_name = trial_.trial_name("e" * 253, 255)
    assert len(trial_name) == trial_.MAX_TRIAL_NAME
    assert len(f"{trial_name}-worker-1023") == constants.MAX_NAME_LENGTH
    assert len(f"{trial_name}{topology.names.CONFIG_MAP_SUFFIX}") <= constants.MAX_NAME_LENGTH


@pytest.mark.parametrize("scheduler, api_version, link", [
    ("Volcano", gang.VOLCANO_API_VERSION, ("annotations", gang.VOLCANO_GROUP_ANNOTATION)),
    ("SchedulerPlugins", gang.SCHEDULER_PLUGINS_API_VERSION, ("labels", gang.SCHEDULER_PLUGINS_GROUP_LABEL)),
])
def test_a_pod_group_gangs_every_rank(trial_of, scheduler, api_version, link):
    trial = trial_of({"parameterServers": {"replicas": 2}, "workers": {"replicas": 3},
                      "scheduling": {"gang": scheduler}})
    objects = topology.render(trial, SETTINGS)
    assert [o["kind"] for o in objects[:3]] == ["Service", "ConfigMap", "PodGroup"]
    [group] = by_kind(objects, "PodGroup")
    assert group["apiVersion"] == api_version
    assert group["spec"] == {"minMember": 5}
    expected_scheduler = {"Volcano": "volcano", "SchedulerPlugins": "scheduler-plugins-scheduler"}[scheduler]
    where, key = link
    for pod in by_kind(objects, "Pod"):
        assert pod["metadata"][where][key] == group["metadata"]["name"]
        assert pod["spec"]["schedulerName"] == expected_scheduler


def test_a_pod_group_counts_pods_not_ranks(trial_of):
    trial = trial_of({"workers": {"replicas": 8, "ranksPerPod": 4}, "scheduling": {"gang": "Volcano"}})
    objects = topology.render(trial, SETTINGS)
    assert by_kind(objects, "PodGroup")[0]["spec"] == {"minMember": 3}  # 1 server, 2 worker pods of 4 ranks
    assert len(by_kind(objects, "Pod")) == 3 and trial.world_size == 9


def test_an_explicit_scheduler_name_wins_over_the_pod_groups_default(trial_of):
    trial = trial_of({"scheduling": {"gang": "Volcano", "schedulerName": "volcano-ml"}})
    assert {p["spec"]["schedulerName"] for p in by_kind(topology.render(trial, SETTINGS), "Pod")} == {"volcano-ml"}


def test_no_pod_group_without_one_asked_for(trial_of):
    objects = topology.render(trial_of({}), SETTINGS)
    assert by_kind(objects, "PodGroup") == []
    assert all("schedulerName" not in p["spec"] for p in by_kind(objects, "Pod"))


def test_a_templates_directory_replaces_the_packaged_templates(trial_of, tmp_path):
    shutil.copytree(rendering.PACKAGED_TEMPLATES, tmp_path, dirs_exist_ok=True)
    macros = tmp_path / "_macros.j2"
    macros.write_text(macros.read_text().replace("  restartPolicy: Never\n",
                                                 "  restartPolicy: Never\n  priority: 7\n"))
    objects = topology.render(trial_of({}), topology.RenderSettings(templates_dir=tmp_path))
    assert {p["spec"]["priority"] for p in by_kind(objects, "Pod")} == {7}


def test_a_missing_template_says_where_to_copy_it_from(trial_of, tmp_path):
    with pytest.raises(topology.TemplateError, match="parameter_server.yaml.j2 not found .* copy it from"):
        topology.render(trial_of({}), topology.RenderSettings(templates_dir=tmp_path))


def test_a_misspelt_variable_fails_the_render(trial_of, tmp_path):
    (tmp_path / "parameter_server.yaml.j2").write_text("kind: {{ kindd | tojson }}\n")
    with pytest.raises(jinja2.UndefinedError):
        topology.render(trial_of({}), topology.RenderSettings(templates_dir=tmp_path))


def test_a_template_that_renders_no_objects_is_refused(trial_of, tmp_path):
    (tmp_path / "parameter_server.yaml.j2").write_text("- just\n- a list\n")
    with pytest.raises(topology.TemplateError, match="not a Kubernetes object"):
        topology.render(trial_of({}), topology.RenderSettings(templates_dir=tmp_path))


@pytest.mark.parametrize("architecture", ["ParameterServer", "PeerToPeer", "RingAllReduce"])
def test_a_data_volume_is_mounted_read_only_in_every_pod_and_named_in_the_contract(trial_of, architecture):
    spec = {"architecture": architecture,
            "data": {"format": "CIFAR10", "path": "cifar-10-batches-bin", "volume": {"claimName": "datasets"}}}
    pods = by_kind(topology.render(trial_of(spec), SETTINGS), "Pod")
    assert len(pods) == (3 if architecture == "ParameterServer" else 2)
    for pod in pods:
        [volume] = [v for v in pod["spec"]["volumes"] if "persistentVolumeClaim" in v]
        assert volume["persistentVolumeClaim"] == {"claimName": "datasets", "readOnly": True}
        [mount] = [m for m in container(pod)["volumeMounts"] if m["name"] == volume["name"]]
        assert mount == {"name": volume["name"], "mountPath": contract.POD_DATA_DIR, "readOnly": True}
        assert env_of(pod)[contract.DATA_DIR] == contract.POD_DATA_DIR
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True


def test_without_a_data_volume_no_claim_is_mounted(trial_of):
    for pod in by_kind(topology.render(trial_of({"data": {"format": "Digits"}}), SETTINGS), "Pod"):
        assert not [v for v in pod["spec"]["volumes"] if "persistentVolumeClaim" in v]
        assert contract.DATA_DIR not in env_of(pod)


def test_a_cap_the_network_enforces_annotates_every_pod_both_ways_and_an_emulated_one_none(trial_of):
    enforced = topology.render(trial_of({"architecture": "RingAllReduce",
                                         "network": {"bandwidth": "100Mbit", "enforcement": "Network"}}), SETTINGS)
    for pod in by_kind(enforced, "Pod"):
        annotations = pod["metadata"]["annotations"]
        assert annotations[constants.ANNOTATION_INGRESS_BANDWIDTH] == "100000000", annotations
        assert annotations[constants.ANNOTATION_EGRESS_BANDWIDTH] == "100000000", annotations
    for spec in ({"network": {"bandwidth": "100Mbit"}}, {}):
        for pod in by_kind(topology.render(trial_of(spec), SETTINGS), "Pod"):
            assert not {constants.ANNOTATION_INGRESS_BANDWIDTH, constants.ANNOTATION_EGRESS_BANDWIDTH} & set(
                pod["metadata"]["annotations"]), (spec, pod["metadata"]["annotations"])


TRICKY_YAML = """\
plain: text
quoted: "08"
numbers: [1, 0o17, 0x1F, 1_000, 1.5, .inf, -.inf]
truths: [true, false, yes, no, on, off, ~, null, ""]
explicit: !!str 123
stamp: 2026-11-23T20:00:00Z
bytes: !!binary aGVsbG8=
1: an integer key
base: &base {cpu: 1, memory: 2Gi}
merged: {<<: *base, memory: 4Gi}
shared: &list [x, {y: z}]
again: *list
---
---
- second document
- {nested: [{deeper: [1, "1"]}]}
"""


def test_rendered_yaml_is_read_exactly_as_pyyamls_safe_loader_reads_it():
    ours = rendering._load_all(TRICKY_YAML)
    assert ours == list(yaml.safe_load_all(TRICKY_YAML))
    assert ours[0]["again"] is ours[0]["shared"]  # an alias is its anchor's object, as PyYAML makes it
    assert ours[0]["merged"] == {"cpu": 1, "memory": "4Gi"} and ours[1] is None
    for refused in ("[a, b]: a sequence as a key\n", "!!map [a, b]\n", "!!seq {a: b}\n"):
        with pytest.raises(yaml.YAMLError):  # refused as PyYAML refuses it, so the render says which template
            rendering._load_all(refused)


@pytest.mark.parametrize("architecture", ["ParameterServer", "PeerToPeer", "RingAllReduce"])
def test_every_packaged_template_reads_as_pyyamls_safe_loader_reads_it(trial_of, architecture):
    trial = trial_of({"architecture": architecture, "workers": {"replicas": 3}})
    text = rendering._environment(rendering.PACKAGED_TEMPLATES.resolve()).get_template(
        rendering.TEMPLATES[trial.spec.architecture]).render(rendering.context(trial, SETTINGS))
    assert rendering._load_all(text) == list(yaml.safe_load_all(text))

"""Values from the experiment never become YAML syntax or template code, whatever characters they hold."""

from __future__ import annotations

import json
import re

import pytest

from ringleader import api, topology
from ringleader.api import spec as spec_
from ringleader.topology import rendering

# Each tries a different way out of a scalar: a new key, a new document, a flow-mapping break, a
# YAML comment, template syntax, and the characters YAML reads as line breaks (NEL, LS).
NEW_KEY = 'x"\n  hostNetwork: true\n  y: "'
NEW_DOCUMENT = "http://mlflow:5000\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: stolen}\n"
FLOW_BREAK = "a}, hostPID: true, {b: c"
TEMPLATE = "{{ settings }}{% raw %}{{ 7 * 7 }}"
COMMENT = "ok # hostNetwork: true"
LINE_BREAKS = "a\x85hostIPC: true\u2028b"


HOSTILE_SCHEDULING = {
    "nodeSelector": {"pool": NEW_KEY, NEW_KEY: "key", "flow": FLOW_BREAK, "breaks": LINE_BREAKS},
    "schedulerName": TEMPLATE,
    "priorityClassName": COMMENT,
    "tolerations": [{"key": FLOW_BREAK, "operator": "Equal", "value": LINE_BREAKS[:60]}],
}
HOSTILE_GROUP_SELECTOR = {"zone": "b\n- name: injected"}


@pytest.fixture
def hostile_trial(experiment_document) -> api.Trial:
    # Free text reaches the pods through validation. Labels, keys and names do not (they are refused as the
    # API server refuses them, below and in test_api_labels.py), so they are put into the trial past it: the
    # rendering must hold whatever its values.
    trial = api.expand(api.parse(experiment_document({
        "image": 'evil"{{7*7}}\'--privileged',
        "tracking": {"uri": NEW_DOCUMENT, "experimentName": TEMPLATE},
        "workers": {"replicas": 2, "groups": [{"name": "g", "replicas": 2}]},
    }))).trials[0]
    spec = trial.spec
    scheduling = spec.scheduling.model_copy(update={
        "node_selector": HOSTILE_SCHEDULING["nodeSelector"],
        "scheduler_name": HOSTILE_SCHEDULING["schedulerName"],
        "priority_class_name": HOSTILE_SCHEDULING["priorityClassName"],
        "tolerations": [spec_.Toleration.model_construct(key=FLOW_BREAK, operator=spec_.TolerationOperator.EQUAL,
                                                         value=LINE_BREAKS[:60])],
    })
    [group] = spec.workers.groups
    group = group.model_copy(update={"node_selector": HOSTILE_GROUP_SELECTOR})
    workers = spec.workers.model_copy(update={"groups": [group]})
    return trial.model_copy(update={"spec": spec.model_copy(update={"scheduling": scheduling, "workers": workers})})


def test_hostile_labels_keys_and_names_are_refused_before_they_reach_a_pod(experiment_document):
    with pytest.raises(api.SpecError) as caught:
        api.parse(experiment_document({"scheduling": HOSTILE_SCHEDULING, "workers": {"replicas": 2, "groups": [
            {"name": "g", "replicas": 2, "nodeSelector": HOSTILE_GROUP_SELECTOR}]}}))
    assert sorted({problem.field for problem in caught.value.problems}) == [
        "spec.scheduling.nodeSelector", "spec.scheduling.nodeSelector.breaks", "spec.scheduling.nodeSelector.flow",
        "spec.scheduling.nodeSelector.pool", "spec.scheduling.priorityClassName", "spec.scheduling.schedulerName",
        "spec.scheduling.tolerations.0.key", "spec.scheduling.tolerations.0.value",
        "spec.workers.groups.0.nodeSelector.zone"]


def test_hostile_values_render_to_exactly_the_expected_objects(hostile_trial):
    objects = topology.render(hostile_trial, topology.RenderSettings(), run_id='r"\nkind: Secret')
    assert [o["kind"] for o in objects] == ["Service", "ConfigMap", "Pod", "Pod", "Pod"]
    for pod in objects[2:]:
        assert set(pod["spec"]) == {
            "restartPolicy", "hostname", "subdomain", "enableServiceLinks", "automountServiceAccountToken",
            "schedulerName", "priorityClassName", "nodeSelector", "tolerations", "securityContext",
            "containers", "volumes"}
        assert set(pod) == {"apiVersion", "kind", "metadata", "spec"}


def test_hostile_values_arrive_intact_as_plain_strings(hostile_trial):
    ps, worker, _ = topology.render(hostile_trial, topology.RenderSettings())[2:]
    [container] = worker["spec"]["containers"]
    assert container["image"] == 'evil"{{7*7}}\'--privileged'
    assert worker["spec"]["schedulerName"] == TEMPLATE
    assert worker["spec"]["priorityClassName"] == COMMENT
    assert worker["spec"]["nodeSelector"] == {"pool": NEW_KEY, NEW_KEY: "key", "flow": FLOW_BREAK,
                                              "breaks": LINE_BREAKS, "zone": "b\n- name: injected"}
    assert worker["spec"]["tolerations"] == [{"key": FLOW_BREAK, "operator": "Equal", "value": LINE_BREAKS[:60]}]
    assert ps["spec"]["nodeSelector"] == {"pool": NEW_KEY, NEW_KEY: "key", "flow": FLOW_BREAK, "breaks": LINE_BREAKS}
    env = {item["name"]: item["value"] for item in container["env"] if "value" in item}
    assert env["MLFLOW_TRACKING_URI"] == NEW_DOCUMENT


def test_the_trial_file_carries_hostile_values_verbatim(hostile_trial):
    config_map = topology.render(hostile_trial, topology.RenderSettings())[1]
    assert json.loads(config_map["data"]["trial.json"]) == json.loads(hostile_trial.model_dump_json(by_alias=True))


def test_every_template_expression_goes_through_tojson_or_a_macro():
    # The rule that makes the above hold for any value: no raw `{{ value }}` anywhere in the templates.
    expression = re.compile(r"{{-?\s*(.*?)\s*-?}}", re.S)
    macro_call = re.compile(r"^(m\.)?\w+\(.*\)(\s*\|\s*indent\(\d+\))?$", re.S)
    templates = sorted(rendering.PACKAGED_TEMPLATES.glob("*.j2"))
    assert {t.name for t in templates} == {"_macros.j2", *rendering.TEMPLATES.values()}
    for template in templates:
        for found in expression.findall(template.read_text()):
            assert found.endswith("| tojson") or macro_call.match(found), f"{template.name}: {{{{ {found} }}}}"


def test_characters_beyond_the_basic_plane_render_and_arrive_intact(experiment_document):
    # json's ensure_ascii writes U+1F680 as a surrogate pair, which YAML refuses: YAML's \U escape instead.
    rocket = "team/\U0001f680 run \U00010348"
    spec = {"image": "localhost/ringleader:\U0001f680", "tracking": {"experimentName": rocket}}
    trial = api.expand(api.parse(experiment_document(spec))).trials[0]

    objects = topology.render(trial, topology.RenderSettings())

    config_map, pods = objects[1], objects[2:]
    assert all(container["image"] == spec["image"] for pod in pods for container in pod["spec"]["containers"])
    assert rocket in "".join(config_map["data"].values())
    assert (api.Trial.model_validate_json(next(iter(config_map["data"].values()))).spec.tracking.experiment_name
            == rocket)

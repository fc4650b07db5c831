"""Values from the experiment never become YAML syntax or template code, whatever characters they hold."""

from __future__ import annotations

import re

import pytest

from ringleader import api, topology
from ringleader.topology import rendering

# Each tries a different way out of a scalar: a new key, a new document, a flow-mapping break, a
# YAML comment, template syntax, and the characters YAML reads as line breaks (NEL, LS).
NEW_KEY = 'x"\n  hostNetwork: true\n  y: "'
NEW_DOCUMENT = "http://mlflow:5000\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: stolen}\n"
FLOW_BREAK = "a}, hostPID: true, {b: c"
TEMPLATE = "{{ settings }}{% raw %}{{ 7 * 7 }}"
COMMENT = "ok # hostNetwork: true"
LINE_BREAKS = "a\x85hostIPC: true\u2028b"


@pytest.fixture
def hostile_trial(experiment_document) -> api.Trial:
    spec = {
        "image": 'evil"{{7*7}}\'--privileged',
        "tracking": {"uri": NEW_DOCUMENT, "experimentName": TEMPLATE},
        "scheduling": {
            "nodeSelector": {"pool": NEW_KEY, NEW_KEY: "key", "flow": FLOW_BREAK, "breaks": LINE_BREAKS},
            "schedulerName": TEMPLATE,
            "priorityClassName": COMMENT,
            "tolerations": [{"key": FLOW_BREAK, "operator": "Equal", "value": LINE_BREAKS[:60]}],
        },
        "workers": {"replicas": 2, "groups": [
            {"name": "g", "replicas": 2, "nodeSelector": {"zone": "b\n- name: injected"}}]},
    }
    return api.expand(api.parse(experiment_document(spec))).trials[0]


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
    env = {item["name"]: item["value"] for item in container["env"]}
    assert env["MLFLOW_TRACKING_URI"] == NEW_DOCUMENT


def test_the_trial_file_carries_hostile_values_verbatim(hostile_trial):
    config_map = topology.render(hostile_trial, topology.RenderSettings())[1]
    assert api.Trial.model_validate_json(config_map["data"]["trial.json"]) == hostile_trial


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
    assert api.Trial.model_validate_json(next(iter(config_map["data"].values()))).spec.tracking.experiment_name == rocket

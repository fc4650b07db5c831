"""The CEL rules in the CRD say what their Python twins say: same verdict, same message, on the same objects.

Evaluated with cel-python (a test-only dependency; skipped without it) on objects defaulted the
way the API server defaults them. Kubernetes' list extension `sum()` is supplied here.
"""

from __future__ import annotations

import pathlib
from typing import Any, Iterator

import pytest
import yaml

from ringleader import api
from ringleader.api import crd

import test_api_labels
import test_api_validation

celpy = pytest.importorskip("celpy")
celtypes = pytest.importorskip("celpy.celtypes")
re2 = pytest.importorskip("re2")  # Go's regular expressions: `$` ends the text, a trailing newline included

ROOT = pathlib.Path(__file__).resolve().parents[2]
KUBERNETES_FUNCTIONS = {"sum": lambda values: celtypes.IntType(sum(values))}


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return crd.openapi_schema()


def rule_sites(value: Any, schema: dict[str, Any]) -> Iterator[tuple[Any, dict[str, Any]]]:
    """(value, schema) of every object in `value` whose schema carries validation rules."""
    if schema.get("x-kubernetes-validations"):
        yield value, schema
    if isinstance(value, dict) and "properties" in schema:
        for name, item in value.items():
            if name in schema["properties"]:
                yield from rule_sites(item, schema["properties"][name])
    elif isinstance(value, list) and "items" in schema:
        for item in value:
            yield from rule_sites(item, schema["items"])


def broken_messages(document: dict[str, Any], schema: dict[str, Any]) -> set[str]:
    """Messages of the rules (not transition rules) that the API server would report for a create."""
    environment = celpy.Environment()
    defaulted = crd.apply_defaults(document, schema)
    broken = set()
    for value, site in rule_sites(defaulted, schema):
        for rule in site["x-kubernetes-validations"]:
            if "oldSelf" in rule["rule"]:
                continue
            program = environment.program(environment.compile(rule["rule"]), functions=KUBERNETES_FUNCTIONS)
            if not program.evaluate({"self": celpy.json_to_cel(value)}):
                broken.add(rule["message"])
    return broken


@pytest.mark.parametrize("case", test_api_validation.RULE_CASES, ids=list(test_api_validation.RULE_CASES))
def test_cel_refuses_what_pydantic_refuses_with_the_same_message(experiment_document, schema, case):
    spec, _, _ = test_api_validation.RULE_CASES[case]
    document = experiment_document(spec)
    with pytest.raises(api.SpecError) as caught:
        api.parse(document)
    python_messages = {problem.message for problem in caught.value.problems}
    assert broken_messages(document, schema) == python_messages


@pytest.mark.parametrize("example", sorted((ROOT / "examples").glob("*.yaml")), ids=lambda p: p.name)
def test_cel_accepts_every_example(schema, example):
    assert broken_messages(yaml.safe_load(example.read_text()), schema) == set()


def test_cel_accepts_an_empty_spec(experiment_document, schema):
    assert broken_messages(experiment_document(), schema) == set()


def test_immutability_rules_refuse_changes_and_allow_equal_updates(schema):
    environment = celpy.Environment()
    spec = schema["properties"]["spec"]
    [workers_rule] = [r for r in spec["properties"]["workers"]["x-kubernetes-validations"] if "oldSelf" in r["rule"]]
    [image_rule] = [r for r in spec["x-kubernetes-validations"] if "oldSelf.image" in r["rule"]]

    def holds(rule, new, old) -> bool:
        program = environment.program(environment.compile(rule["rule"]))
        return bool(program.evaluate({"self": celpy.json_to_cel(new), "oldSelf": celpy.json_to_cel(old)}))

    assert holds(workers_rule, {"replicas": 2}, {"replicas": 2})
    assert not holds(workers_rule, {"replicas": 4}, {"replicas": 2})
    assert holds(image_rule, {"image": "a"}, {"image": "b"})  # the field's own rule catches a change
    assert not holds(image_rule, {"image": "a"}, {})


@pytest.mark.parametrize("network, sweep", [
    ({"bandwidth": "100Mbit", "enforcement": "Network"}, None),
    ({"enforcement": "Network"}, {"matrix": {"bandwidth": ["100Mbit", "1Gbit"]}}),
    ({"bandwidth": "100Mbit"}, None),
], ids=["cap", "swept cap", "emulated by default"])
def test_network_enforcement_with_a_cap_is_accepted_by_cel_and_pydantic(experiment_document, schema, network, sweep):
    document = experiment_document({"network": network, **({"sweep": sweep} if sweep else {})})
    assert api.parse(document).spec.network.enforcement.value == network.get("enforcement", "Emulated")
    assert broken_messages(document, schema) == set()


def node(schema: dict[str, Any], path: str) -> dict[str, Any]:
    """The schema node at a dotted path under spec: `scheduling.tolerations[].key`."""
    found = schema["properties"]["spec"]
    for part in path.split("."):
        found = found["properties"][part.removesuffix("[]")]
        if part.endswith("[]"):
            found = found["items"]
    return found


def api_server_accepts(value: Any, site: dict[str, Any]) -> bool:
    """The verdict of a node's maxLength (in characters) and pattern (RE2) on a string, and of its CEL rules."""
    if isinstance(value, str):
        if len(value) > site.get("maxLength", len(value)):
            return False
        if "pattern" in site and re2.search(site["pattern"], value) is None:
            return False
    environment = celpy.Environment()
    return all(environment.program(environment.compile(rule["rule"])).evaluate({"self": celpy.json_to_cel(value)})
               for rule in site.get("x-kubernetes-validations", []) if "oldSelf" not in rule["rule"])


SELECTORS = ["scheduling.nodeSelector", "workers.groups[].nodeSelector"]


@pytest.mark.parametrize("key", test_api_labels.KEYS, ids=range(len(test_api_labels.KEYS)))
def test_the_crd_refuses_a_label_key_when_kubernetes_refuses_it(schema, key):
    expected = test_api_labels.kubernetes_qualified_name(key)
    for selector in SELECTORS:
        assert api_server_accepts({key: "v", "disktype": "ssd"}, node(schema, selector)) == expected, selector
    assert api_server_accepts(key, node(schema, "scheduling.tolerations[].key")) == expected


@pytest.mark.parametrize("value", test_api_labels.VALUES, ids=range(len(test_api_labels.VALUES)))
def test_the_crd_refuses_a_label_value_when_kubernetes_refuses_it(schema, value):
    expected = test_api_labels.kubernetes_label_value(value)
    for selector in SELECTORS:
        assert api_server_accepts(value, node(schema, selector)["additionalProperties"]) == expected, selector
    assert api_server_accepts(value, node(schema, "scheduling.tolerations[].value")) == expected


@pytest.mark.parametrize("value", test_api_labels.SUBDOMAINS, ids=range(len(test_api_labels.SUBDOMAINS)))
def test_the_crd_refuses_a_scheduler_or_priority_class_name_when_kubernetes_refuses_it(schema, value):
    expected = test_api_labels.kubernetes_subdomain(value)
    for field in ("scheduling.schedulerName", "scheduling.priorityClassName"):
        assert api_server_accepts(value, node(schema, field)) == expected, field

"""Labels, annotations and names are refused exactly when the API server refuses them.

The oracle is apimachinery's own code (IsQualifiedName, IsValidLabelValue, IsDNS1123Subdomain and
ValidateAnnotations of k8s.io/apimachinery v0.34), transcribed line by line below, so that the models'
patterns are checked against the rules rather than against themselves. test_crd_cel.py holds the CRD's
CEL rules and patterns to the same corpus.
"""

from __future__ import annotations

import re

import pytest

from ringleader import api
from ringleader.api import labels

# apimachinery/pkg/util/validation/validation.go
QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
DNS1123_SUBDOMAIN_FMT = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"


def kubernetes_subdomain(value: str) -> bool:
    return len(value) <= 253 and re.fullmatch(DNS1123_SUBDOMAIN_FMT, value) is not None


def kubernetes_qualified_name(value: str) -> bool:
    parts = value.split("/")
    if len(parts) == 1:
        prefix_ok, name = True, parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        prefix_ok = len(prefix) > 0 and kubernetes_subdomain(prefix)
    else:
        return False
    return prefix_ok and 0 < len(name) <= 63 and re.fullmatch(QUALIFIED_NAME_FMT, name) is not None


def kubernetes_label_value(value: str) -> bool:
    return len(value) <= 63 and re.fullmatch(f"({QUALIFIED_NAME_FMT})?", value) is not None


KEYS = [
    "a", "A", "1", "disktype", "kubernetes.io/hostname", "nvidia.com/gpu.present", "example.com/Team_A",
    "x" * 63, "x" * 64, "a" * 253 + "/b", "a" * 254 + "/b", "a" * 253 + "/" + "b" * 63, "a" * 253 + "/" + "b" * 64,
    "a" * 64 + ".com/b", "1.2.3/4", "a-b.c/d_e.f-g", "", "-a", "a-", "_a", "a.", "/b", "a/", "a/b/c", "A/b",
    "a..b/c", "a.-b/c", "-a.b/c", "a_b/c", "a b", "a\n", "a\nb", "\na", "a\0", "a\r", "a\t", "a\u2028",
    "a\u2029", "a\x85", "\u00e4", "a:b", "a\\b", "a" * 2**20,
]
VALUES = ["", "a", "A-b_c.d", "1", "x" * 63, "x" * 64, "-a", "a-", ".a", "a b", "a\n", "a\0", "a\u2028", "a/b",
          "\u00e4", "a\r\n", "true"]
SUBDOMAINS = ["volcano", "scheduler-plugins-scheduler", "high.priority", "a" * 253, "a" * 254, "High", "a_b",
              "a..b", "-a", "a-", "a.", "", "volcano\n", "a b", "a\0", "\u00e4"]


def test_the_oracle_knows_the_edges():
    assert kubernetes_qualified_name("a" * 253 + "/" + "b" * 63) and not kubernetes_qualified_name("a" * 254 + "/b")
    assert kubernetes_label_value("") and not kubernetes_label_value("a\n")
    assert not kubernetes_subdomain("volcano\n")


def node_selector_problems(experiment_document, selector: dict[str, str]) -> list[str]:
    try:
        api.parse(experiment_document({"scheduling": {"nodeSelector": selector}}))
    except api.SpecError as error:
        return error.problems
    return []


@pytest.mark.parametrize("key", KEYS, ids=range(len(KEYS)))
def test_a_node_selector_key_is_refused_when_kubernetes_refuses_it(experiment_document, key):
    assert labels.is_qualified_name(key) == kubernetes_qualified_name(key)
    problems = node_selector_problems(experiment_document, {key: "v"})
    assert (problems == []) == kubernetes_qualified_name(key), problems
    for problem in problems:
        assert problem.startswith("`spec.scheduling.nodeSelector` key ")
        assert problem.field == "spec.scheduling.nodeSelector"
        assert problem.endswith(f"must be {labels.LABEL_KEY_HINT}")


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_a_node_selector_value_is_refused_when_kubernetes_refuses_it(experiment_document, value):
    problems = node_selector_problems(experiment_document, {"disktype": value})
    assert (problems == []) == kubernetes_label_value(value), problems


@pytest.mark.parametrize("value", SUBDOMAINS, ids=range(len(SUBDOMAINS)))
@pytest.mark.parametrize("field", ["schedulerName", "priorityClassName"])
def test_scheduler_and_priority_class_names_are_dns_subdomains(experiment_document, field, value):
    document = experiment_document({"scheduling": {field: value}})
    if kubernetes_subdomain(value):
        assert getattr(api.parse(document).spec.scheduling, "scheduler_name" if field == "schedulerName"
                       else "priority_class_name") == value
    else:
        with pytest.raises(api.SpecError, match=f"`spec.scheduling.{field}` must "):
            api.parse(document)


@pytest.mark.parametrize("key", KEYS, ids=range(len(KEYS)))
def test_metadata_labels_and_worker_group_selectors_follow_the_same_rules(experiment_document, key):
    document = experiment_document({"workers": {"replicas": 1, "groups": [
        {"name": "g", "replicas": 1, "nodeSelector": {key: "v"}}]}})
    document["metadata"]["labels"] = {key: "v"}
    if kubernetes_qualified_name(key):
        assert api.parse(document).metadata.labels == {key: "v"}
    else:
        with pytest.raises(api.SpecError) as caught:
            api.parse(document)
        assert [problem.field for problem in caught.value.problems] == [
            "metadata.labels", "spec.workers.groups.0.nodeSelector"]


def test_a_toleration_key_is_a_label_key_and_its_value_a_label_value(experiment_document):
    for key in KEYS:
        document = experiment_document({"scheduling": {"tolerations": [{"key": key, "operator": "Exists"}]}})
        if kubernetes_qualified_name(key):
            assert api.parse(document).spec.scheduling.tolerations[0].key == key
        else:
            with pytest.raises(api.SpecError, match=r"\n  - `spec.scheduling.tolerations.0.key` must be a label key"):
                api.parse(document)
    for value in VALUES:
        document = experiment_document({"scheduling": {"tolerations": [{"key": "gpu", "value": value}]}})
        if kubernetes_label_value(value):
            assert api.parse(document).spec.scheduling.tolerations[0].value == value
        else:
            with pytest.raises(api.SpecError, match="`spec.scheduling.tolerations.0.value` must "):
                api.parse(document)


def test_a_key_problem_names_the_map_and_quotes_the_key(experiment_document):
    [problem] = node_selector_problems(experiment_document, {"disk\ntype": "ssd"})
    assert problem == f"`spec.scheduling.nodeSelector` key 'disk\\ntype' must be {labels.LABEL_KEY_HINT}"
    assert (problem.field, problem.message) == (
        "spec.scheduling.nodeSelector", f"key 'disk\\ntype' must be {labels.LABEL_KEY_HINT}")


@pytest.mark.parametrize("key", KEYS + ["Example.COM/Owner", "A/b", "\u212a"], ids=range(len(KEYS) + 3))
def test_annotation_keys_are_qualified_names_in_either_case(experiment_document, key):
    document = experiment_document()
    document["metadata"]["annotations"] = {key: "anything\nat all"}
    if kubernetes_qualified_name(key.lower()):  # ValidateAnnotations lower-cases the key (strings.ToLower)
        assert api.parse(document).metadata.annotations == {key: "anything\nat all"}
    else:
        with pytest.raises(api.SpecError, match=f"`metadata.annotations` key .* must be {labels.ANNOTATION_KEY_HINT}"):
            api.parse(document)


def test_annotations_hold_at_most_256_kib_counted_in_bytes_as_the_api_server_counts_them(experiment_document):
    def parsed(annotations):
        document = experiment_document()
        document["metadata"]["annotations"] = annotations
        return api.parse(document)

    full = {"a": "x" * (labels.ANNOTATIONS_MAX_BYTES - 3), "b": ""}  # keys count too: 1 + 1
    assert parsed({**full, "b": "x"}).metadata.annotations["b"] == "x"
    with pytest.raises(api.SpecError) as caught:
        parsed({**full, "b": "\u00e9"})  # one character, two bytes of UTF-8
    assert caught.value.problems == [
        "`metadata.annotations` must hold at most 262144 bytes, keys and values together, as the API server counts "
        "them (got 262145): keep large data out of annotations"]

"""The generated CRD is a structural schema the API server accepts, teaches the API, and matches the models.

The checker below implements the Kubernetes structural-schema rules the generator could break
(apiextensions-apiserver's `structural` validation); a real API server checks the rest in e2e.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from ringleader import api
from ringleader.api import crd, labels

TYPES = {"object", "array", "string", "integer", "number", "boolean"}
ALLOWED_KEYS = {
    "type", "format", "description", "default", "nullable", "enum", "minimum", "exclusiveMinimum", "maximum",
    "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "pattern", "minItems", "maxItems", "minProperties",
    "maxProperties", "required", "properties", "additionalProperties", "items", "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys", "x-kubernetes-map-type", "x-kubernetes-validations",
    "x-kubernetes-preserve-unknown-fields", "x-kubernetes-int-or-string", "x-kubernetes-embedded-resource",
}
FORMATS = {"date-time", "date", "int32", "int64", "float", "double", "byte", "duration", "uri", "hostname"}
PYTHON_TYPES = {"object": dict, "array": list, "string": str, "integer": int, "number": (int, float), "boolean": bool}


def value_problems(value: Any, schema: dict[str, Any], path: str) -> list[str]:
    """Whether `value` (a default) passes OpenAPI validation and pruning (no unknown fields)."""
    kind = schema["type"]
    if not isinstance(value, PYTHON_TYPES[kind]) or (kind in ("integer", "number") and isinstance(value, bool)):
        return [f"{path}: default {value!r} is not a {kind}"]
    problems = []
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{path}: default {value!r} is not one of the enum")
    if "minimum" in schema and value < schema["minimum"]:
        problems.append(f"{path}: default {value!r} is below minimum")
    if "maximum" in schema and value > schema["maximum"]:
        problems.append(f"{path}: default {value!r} is above maximum")
    if "pattern" in schema and not re.search(schema["pattern"], value):
        problems.append(f"{path}: default {value!r} does not match its pattern")
    if kind == "object":
        properties = schema.get("properties")
        for key, item in value.items():
            if properties is not None and key not in properties:
                problems.append(f"{path}.{key}: default has a field the schema would prune")
            elif properties is not None:
                problems += value_problems(item, properties[key], f"{path}.{key}")
            elif isinstance(schema.get("additionalProperties"), dict):
                problems += value_problems(item, schema["additionalProperties"], f"{path}.{key}")
        problems += [f"{path}.{key}: default misses a required field" for key in schema.get("required", [])
                     if key not in value]
    if kind == "array":
        for i, item in enumerate(value):
            problems += value_problems(item, schema["items"], f"{path}[{i}]")
    return problems


def field_path_exists(schema: dict[str, Any], field_path: str) -> bool:
    node = schema
    for part in field_path.strip(".").split("."):
        node = node.get("properties", {}).get(part)
        if node is None:
            return False
    return True


def structural_problems(node: dict[str, Any], path: str = "") -> list[str]:
    """Every way `node` (and what is under it) breaks the structural-schema rules."""
    problems = [f"{path}: `{key}` is not allowed in a structural schema" for key in sorted(set(node) - ALLOWED_KEYS)]
    kind = node.get("type")
    if kind not in TYPES:
        problems.append(f"{path}: every node needs a type (found {kind!r})")
        return problems
    if "properties" in node and "additionalProperties" in node:
        problems.append(f"{path}: properties and additionalProperties are mutually exclusive")
    if isinstance(node.get("additionalProperties"), bool):
        problems.append(f"{path}: additionalProperties must be a schema, not a boolean")
    if kind == "array" and "items" not in node:
        problems.append(f"{path}: an array needs items")
    if kind == "object" and "properties" not in node and "additionalProperties" not in node and path != ".metadata":
        problems.append(f"{path}: an object with neither properties nor additionalProperties prunes everything")
    if "format" in node and node["format"] not in FORMATS:
        problems.append(f"{path}: unknown format {node['format']!r}")
    for bound, inclusive in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if bound in node and (not isinstance(node[bound], bool) or inclusive not in node):
            problems.append(f"{path}: {bound} must be a boolean beside {inclusive} (OpenAPI 3.0)")
    if "enum" in node:
        problems += [f"{path}: enum value {v!r} is not a {kind}" for v in node["enum"]
                     if not isinstance(v, PYTHON_TYPES[kind])]
    if "default" in node:
        problems += value_problems(node["default"], node, path)
    for key in node.get("required", []):
        if key not in node.get("properties", {}):
            problems.append(f"{path}: required field {key!r} is not a property")
    if node.get("x-kubernetes-list-type") == "map":
        items = node["items"]
        for key in node.get("x-kubernetes-list-map-keys", []):
            prop = items.get("properties", {}).get(key)
            if prop is None or prop.get("type") not in ("string", "integer", "boolean"):
                problems.append(f"{path}: list-map key {key!r} must be a scalar property of the items")
            elif key not in items.get("required", []) and "default" not in prop:
                problems.append(f"{path}: list-map key {key!r} must be required or defaulted")
    for rule in node.get("x-kubernetes-validations", []):
        if set(rule) - {"rule", "message", "fieldPath", "reason", "messageExpression", "optionalOldSelf"}:
            problems.append(f"{path}: unknown key in a validation rule: {rule}")
        if not rule.get("rule") or not rule.get("message"):
            problems.append(f"{path}: a validation rule needs a rule and a message: {rule}")
        if "fieldPath" in rule and not field_path_exists(node, rule["fieldPath"]):
            problems.append(f"{path}: fieldPath {rule['fieldPath']} names no field")
    for name, prop in node.get("properties", {}).items():
        problems += structural_problems(prop, f"{path}.{name}")
    if isinstance(node.get("additionalProperties"), dict):
        problems += structural_problems(node["additionalProperties"], f"{path}.*")
    if "items" in node:
        problems += structural_problems(node["items"], f"{path}[]")
    return problems


def walk(node: dict[str, Any], path: str = ""):
    """(path, node) of every node under `node`, itself included."""
    yield path, node
    for name, prop in node.get("properties", {}).items():
        yield from walk(prop, f"{path}.{name}")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], f"{path}.*")
    if "items" in node:
        yield from walk(node["items"], f"{path}[]")


@pytest.fixture(scope="module")
def definition() -> dict[str, Any]:
    return crd.crd()


@pytest.fixture(scope="module")
def schema(definition) -> dict[str, Any]:
    [version] = definition["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]


def test_the_checker_catches_what_the_api_server_refuses():
    assert structural_problems({"type": "object", "properties": {"a": {"$ref": "#/x"}}}) == [
        ".a: `$ref` is not allowed in a structural schema", ".a: every node needs a type (found None)"]
    assert "`anyOf` is not allowed" in structural_problems(
        {"type": "string", "anyOf": [{"type": "string"}, {"type": "null"}]})[0]
    assert structural_problems({"type": "object", "properties": {}, "additionalProperties": False}) == [
        ": properties and additionalProperties are mutually exclusive",
        ": additionalProperties must be a schema, not a boolean"]
    assert structural_problems({"type": "number", "minimum": 0, "exclusiveMinimum": 0}) == [
        ": exclusiveMinimum must be a boolean beside minimum (OpenAPI 3.0)"]
    assert structural_problems({"type": "integer", "default": 0, "minimum": 1}) == [": default 0 is below minimum"]


def test_the_schema_is_structural(schema):
    assert structural_problems(schema) == []


def test_no_pydantic_artefacts_remain(definition):
    text = crd.to_yaml(definition)
    for artefact in ("$ref", "$defs", "anyOf", "title:", "const:", "additionalProperties: false", "null", "&id"):
        assert artefact not in text


def test_every_field_is_described_starting_with_its_name(schema):
    for path, node in walk(schema):
        name = path.rsplit(".", 1)[-1]
        if path in ("", ".metadata") or name.endswith("[]") or name == "*":
            continue
        description = node.get("description", "")
        assert description.split(" ", 1)[0].strip("`").startswith(name), f"{path}: {description!r}"


def test_the_resource_itself_is_described(schema):
    assert schema["description"].startswith("DistributedTrainingExperiment runs a distributed-training job")
    assert schema["properties"]["spec"]["description"].startswith("spec of a DistributedTrainingExperiment")
    assert schema["properties"]["metadata"] == {"type": "object"}  # left to the API server


def test_strings_lists_and_maps_of_the_spec_are_bounded_for_cel_cost(schema):
    # CEL rules and `self == oldSelf` cost in proportion to the largest value a field may hold.
    for path, node in walk(schema["properties"]["spec"], ".spec"):
        kind = node["type"]
        if kind == "string":
            assert "maxLength" in node, path
        elif kind == "array":
            assert "maxItems" in node, path
        elif kind == "object" and "additionalProperties" in node:
            assert "maxProperties" in node, path


def test_names_short_names_and_versions(definition):
    spec = definition["spec"]
    assert definition["metadata"]["name"] == "distributedtrainingexperiments.ringleader.dev"
    assert spec["group"] == "ringleader.dev" and spec["scope"] == "Namespaced"
    assert spec["names"]["shortNames"] == ["dte", "dtes"] and spec["names"]["categories"] == ["ringleader"]
    [version] = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}


def test_printer_columns_point_at_fields_that_exist(definition, schema):
    [version] = definition["spec"]["versions"]
    columns = {c["name"]: c for c in version["additionalPrinterColumns"]}
    assert list(columns) == ["Architecture", "Paradigm", "Workers", "Phase", "Progress", "Best", "Throughput", "ETA",
                             "Age"]
    # What the experiment runs comes from status: the spec's architecture is only a sweep's default.
    assert [columns[c]["jsonPath"] for c in ("Architecture", "Paradigm", "Workers")] == [
        ".status.compares.architecture", ".status.compares.paradigm", ".status.compares.workers"]
    # kubectl prints a date column in the future as "<invalid>": the ETA is a string the operator writes.
    assert columns["Progress"]["type"] == columns["ETA"]["type"] == "string"
    for column in columns.values():
        if column["jsonPath"].startswith(".metadata"):
            continue
        assert field_path_exists(schema, column["jsonPath"]), column["jsonPath"]


def test_optional_fields_have_their_type_and_no_null_default(schema):
    staleness = schema["properties"]["spec"]["properties"]["sync"]["properties"]["staleness"]
    assert staleness["type"] == "integer" and "default" not in staleness
    assert (staleness["minimum"], staleness["maximum"]) == (0, 1000)
    learning_rate = schema["properties"]["spec"]["properties"]["model"]["properties"]["optimizer"]["properties"][
        "learningRate"]
    assert (learning_rate["minimum"], learning_rate["exclusiveMinimum"]) == (0, True)


def test_worker_groups_are_a_list_keyed_by_name(schema):
    groups = schema["properties"]["spec"]["properties"]["workers"]["properties"]["groups"]
    assert groups["x-kubernetes-list-type"] == "map" and groups["x-kubernetes-list-map-keys"] == ["name"]
    assert groups["maxItems"] == 16
    selector = groups["items"]["properties"]["nodeSelector"]
    assert selector["additionalProperties"] == {"type": "string", "maxLength": 63,
                                                "pattern": labels.LABEL_VALUE_PATTERN}
    assert [rule["message"] for rule in selector["x-kubernetes-validations"]] == [
        f"`workers.groups[].nodeSelector` keys must each be {labels.LABEL_KEY_HINT}: rename the key"]


def test_the_models_rules_are_published_as_cel(schema):
    spec = schema["properties"]["spec"]
    sync_rules = spec["properties"]["sync"]["x-kubernetes-validations"]
    assert sync_rules[0]["fieldPath"] == ".maxStaleness"
    assert sync_rules[0]["message"].startswith("`sync.maxStaleness` must be greater than `sync.staleness`")
    spec_rules = [r["message"] for r in spec["x-kubernetes-validations"]]
    assert any(m.startswith("`sync.paradigm` must be BSP when `architecture` is RingAllReduce") for m in spec_rules)


def test_everything_but_run_policy_is_immutable(schema):
    spec = schema["properties"]["spec"]
    for name, prop in spec["properties"].items():
        transition = [r for r in prop.get("x-kubernetes-validations", []) if "oldSelf" in r["rule"]]
        if name == "runPolicy":
            assert transition == []
        else:
            assert transition == [{"rule": "self == oldSelf",
                                   "message": f"`spec.{name}` is immutable: create a new experiment to change it"}]
    presence = [r["rule"] for r in spec["x-kubernetes-validations"] if "oldSelf" in r["rule"]]
    assert presence == ["has(self.image) == has(oldSelf.image)", "has(self.profiling) == has(oldSelf.profiling)",
                        "has(self.sweep) == has(oldSelf.sweep)"]


def test_the_api_servers_defaulting_gives_the_models_defaults(schema):
    defaulted = crd.apply_defaults({"spec": {}}, schema)
    assert defaulted["spec"] == api.ExperimentSpec().wire()
    partial = crd.apply_defaults({"spec": {"workers": {"replicas": 3, "groups": [{"name": "g", "replicas": 3}]}}},
                                 schema)
    assert partial["spec"] == api.ExperimentSpec.model_validate(
        {"workers": {"replicas": 3, "groups": [{"name": "g", "replicas": 3}]}}).wire()


def test_status_lists_are_keyed_for_server_side_apply(schema):
    status = schema["properties"]["status"]["properties"]
    assert status["conditions"]["x-kubernetes-list-map-keys"] == ["type"]
    assert status["trials"]["x-kubernetes-list-map-keys"] == ["name"]
    assert status["startTime"] == {"type": "string", "format": "date-time",
                                   "description": "startTime is when the first trial started."}


def test_a_union_of_types_is_refused_with_the_field_named():
    node = {"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}
    with pytest.raises(crd.SchemaError, match=r"^\.x: a union of several types"):
        crd.structural(node, {})


def test_the_yaml_is_stable_and_parses_back(definition):
    text = crd.to_yaml()
    assert text == crd.to_yaml()
    assert text.startswith("# Generated from the pydantic models")
    assert yaml.safe_load(text) == definition


def test_committed_crds_are_current(repo_root):
    directories = [repo_root / "crds"]
    chart = repo_root / "charts" / "ringleader" / "crds"
    if (chart / crd.FILE_NAME).exists():
        directories.append(chart)
    assert crd.stale(directories) == [], "run `make crds` (python -m ringleader.api.crd --out crds/ ...)"


def test_check_exits_non_zero_with_a_diff_when_stale(tmp_path, capsys):
    assert crd.main(["--out", str(tmp_path)]) == 0
    assert crd.main(["--check", str(tmp_path)]) == 0
    target = tmp_path / crd.FILE_NAME
    target.write_text(target.read_text().replace("maxItems: 16", "maxItems: 17", 1))
    assert crd.main(["--check", str(tmp_path)]) == 1
    output = capsys.readouterr()
    changed = [line for line in output.out.splitlines() if line[:1] in "+-" and "maxItems" in line]
    assert [line[0] + line[1:].strip() for line in changed] == ["-maxItems: 17", "+maxItems: 16"]
    assert "run `make crds`" in output.err


def test_check_reports_a_missing_file(tmp_path):
    assert crd.stale([tmp_path]) and "generated" in crd.stale([tmp_path])[0]

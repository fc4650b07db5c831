"""values.yaml and values.schema.json describe the same values, every value is commented, the schema is strict.

These checks need no helm binary: they read the two files. test_chart.py renders the chart.
"""

import json
import pathlib
import re

import pytest
import yaml

CHART = pathlib.Path(__file__).resolve().parents[2] / "charts" / "ringleader"
VALUES_TEXT = (CHART / "values.yaml").read_text()
VALUES = yaml.safe_load(VALUES_TEXT)
SCHEMA = json.loads((CHART / "values.schema.json").read_text())
TYPES = {"string": str, "integer": int, "boolean": bool, "array": list, "object": dict, "number": (int, float)}


def leaves(values, schema, path=""):
    """(path, value, schema) of every value of values.yaml, walking the schema beside it."""
    for key, value in values.items():
        here = f"{path}.{key}" if path else key
        properties = schema.get("properties", {})
        assert key in properties, f"`{here}` is in values.yaml but not in values.schema.json"
        sub = properties[key]
        if isinstance(value, dict) and sub.get("additionalProperties") is False:
            yield from leaves(value, sub, here)
        else:
            yield here, value, sub


def schema_paths(schema, path=""):
    for key, sub in schema.get("properties", {}).items():
        here = f"{path}.{key}" if path else key
        if sub.get("type") == "object" and sub.get("additionalProperties") is False:
            yield from schema_paths(sub, here)
        else:
            yield here


def test_every_value_of_values_yaml_is_in_the_schema_with_its_type():
    for path, value, schema in leaves(VALUES, SCHEMA):
        if "type" in schema:
            assert isinstance(value, TYPES[schema["type"]]), f"`{path}`: {value!r} is not a {schema['type']}"
        if "enum" in schema:
            assert value in schema["enum"], f"`{path}`: {value!r} is not one of {schema['enum']}"
        if "pattern" in schema and isinstance(value, str):
            assert re.search(schema["pattern"], value), f"`{path}`: {value!r} does not match {schema['pattern']}"


def test_every_value_of_the_schema_is_in_values_yaml():
    documented = {path for path, _, _ in leaves(VALUES, SCHEMA)}
    missing = [path for path in schema_paths(SCHEMA) if path not in documented]
    assert missing == [], f"values.schema.json has values that values.yaml lacks: {missing}"


def test_the_schema_refuses_unknown_keys_at_every_level():
    def objects(schema, path="(root)"):
        if schema.get("type") == "object" and "properties" in schema:
            yield path, schema
        for key, sub in schema.get("properties", {}).items():
            yield from objects(sub, f"{path}.{key}")

    loose = [path for path, schema in objects(SCHEMA) if schema.get("additionalProperties") is not False]
    assert loose == []


def _line_of(path):
    """Index of the line of `path` ("operator.resources") in values.yaml."""
    lines, depth, number = VALUES_TEXT.splitlines(), 0, 0
    for part in path.split("."):
        number = next(n for n in range(number, len(lines)) if re.match(rf"^ {{{depth}}}{part}:", lines[n]))
        depth += 2
    return number


def _comment_above(path):
    lines, comment = VALUES_TEXT.splitlines(), []
    for line in reversed(lines[:_line_of(path)]):
        if not line.strip().startswith("#"):
            break
        comment.insert(0, line.strip().lstrip("# "))
    return " ".join(comment)


def test_every_value_in_values_yaml_has_a_comment():
    uncommented = [path for path, _, _ in leaves(VALUES, SCHEMA) if not _comment_above(path)]
    assert uncommented == [], f"values without a comment: {uncommented}"


@pytest.mark.parametrize("path", ["operator.resources", "scope.mode", "image.repository", "mlflow.enabled"])
def test_comments_give_the_default_and_production_advice_where_it_matters(path):
    text = _comment_above(path)
    assert "Default" in text and "Production" in text, f"`{path}` comment: {text}"

"""Generates the DistributedTrainingExperiment CRD from the pydantic models; `make crds`, CI and `ringleader crd` call
it.

    python -m ringleader.api.crd --out crds/ --out charts/ringleader/crds/   # write
    python -m ringleader.api.crd --check crds/ charts/ringleader/crds/       # exit 1 with a diff if stale
    python -m ringleader.api.crd --docs docs/api.md                       # refresh its field reference (reference.py)

Pydantic's JSON schema is turned into a *structural* OpenAPI v3 schema, as the API server
demands: every `$ref` inlined, Optional fields reduced to their type, no titles, a type on
every node, numeric exclusive bounds in OpenAPI 3.0 form. The CEL rules the models publish
(`rules.py`) come along; immutability rules are added here, where the CRD is the only enforcer.
"""

from __future__ import annotations

import argparse
import copy
import difflib
import pathlib
import sys
from typing import Any

import pydantic
import yaml

from ringleader.api import constants, reference, rules
from ringleader.api.experiment import DistributedTrainingExperiment
from ringleader.api.spec import ExperimentSpec
from ringleader.api.status import ExperimentStatus

FILE_NAME = f"{constants.GROUP}_{constants.PLURAL}.yaml"
HEADER = ("# Generated from the pydantic models in operator/ringleader/api by `python -m ringleader.api.crd`.\n"
          "# Do not edit: change the models and run `make crds`.\n")
# Spec fields a running experiment may change; everything else is fixed at creation (runPolicy.suspend
# pauses an experiment, backoffLimit and deadlines may be relaxed).
MUTABLE_SPEC_FIELDS = ("runPolicy",)
# Keys of pydantic's JSON schema that carry no meaning for the API server, or that it forbids.
DROPPED_KEYS = ("title", "$defs", "examples", "discriminator", "const", "readOnly", "writeOnly")
# Keys in the order a reader wants them: what it is, what it means, its bounds, then what is inside.
KEY_ORDER = ("type", "format", "description", "default", "enum", "minimum", "exclusiveMinimum", "maximum",
             "exclusiveMaximum", "minLength", "maxLength", "pattern", "minItems", "maxItems", "maxProperties",
             "required", "properties", "additionalProperties", "items", "x-kubernetes-list-type",
             "x-kubernetes-list-map-keys", "x-kubernetes-validations", "rule", "message", "fieldPath", "reason")
# What the experiment compares comes from status (the operator writes what its trials run): the spec's own
# architecture, paradigm and workers are a sweep's defaults, not what it compares.
PRINTER_COLUMNS = [
    {"name": "Architecture", "type": "string", "jsonPath": ".status.compares.architecture",
     "description": "the trials' architecture, or the architectures a sweep compares"},
    {"name": "Paradigm", "type": "string", "jsonPath": ".status.compares.paradigm",
     "description": "the trials' paradigm, or the paradigms a sweep compares"},
    {"name": "Workers", "type": "string", "jsonPath": ".status.compares.workers",
     "description": "workers per trial, or the worker counts a sweep compares"},
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {"name": "Progress", "type": "string", "jsonPath": ".status.progressText"},
    {"name": "Best", "type": "string", "jsonPath": ".status.best.text",
     "description": "a sweep's succeeded trial with the highest throughput, by its swept values"},
    {"name": "Throughput", "type": "number", "jsonPath": ".status.summary.throughput",
     "description": "samples per second, all workers together, of the best succeeded trial (with one trial, its own)"},
    # A string, not a date: kubectl prints a date in the future as "<invalid>" (it shows ages only).
    {"name": "ETA", "type": "string", "jsonPath": ".status.estimate.text",
     "description": "when the experiment is expected to end (RFC 3339, UTC); \"at most\" when model.target may "
                    "stop trials sooner"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


class SchemaError(ValueError):
    """A model uses a shape that has no structural OpenAPI form; the message names the node."""


def _description(text: str) -> str:
    """Docstring lines joined into paragraphs, so `kubectl explain` wraps them itself."""
    paragraphs = [" ".join(line.strip() for line in block.splitlines()) for block in text.strip().split("\n\n")]
    return "\n\n".join(paragraphs)


def _without_nulls(value: Any) -> Any:
    """Pydantic writes unset optional fields as null in defaults; the API server wants them absent."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def apply_defaults(value: Any, schema: dict[str, Any]) -> Any:
    """The API server's defaulting, in place: a missing property gets its default, then defaults apply inside it."""
    if isinstance(value, dict) and "properties" in schema:
        for name, prop in schema["properties"].items():
            if name not in value and "default" in prop:
                value[name] = copy.deepcopy(prop["default"])
        for name, item in value.items():
            if name in schema["properties"]:
                apply_defaults(item, schema["properties"][name])
    elif isinstance(value, dict) and isinstance(schema.get("additionalProperties"), dict):
        for item in value.values():
            apply_defaults(item, schema["additionalProperties"])
    elif isinstance(value, list) and "items" in schema:
        for item in value:
            apply_defaults(item, schema["items"])
    return value


def structural(node: dict[str, Any], defs: dict[str, Any], path: str = "") -> dict[str, Any]:
    """One node of pydantic's schema as a structural OpenAPI v3 node (recursively)."""
    node = dict(node)
    if "$ref" in node:
        target = defs[node.pop("$ref").rsplit("/", 1)[-1]]
        node = {**target, **node}  # the property's own description and default win over its class's
    if "anyOf" in node:
        branches = [b for b in node.pop("anyOf") if b.get("type") != "null"]
        if len(branches) != 1:
            raise SchemaError(f"{path or 'root'}: a union of several types has no structural form; "
                              "use one type per field (a tagged object, or a string with an enum)")
        node = {**branches[0], **node}
        return structural(node, defs, path)
    for key in DROPPED_KEYS:
        node.pop(key, None)
    for key in ("oneOf", "allOf", "not", "uniqueItems", "propertyNames", "prefixItems"):
        if key in node:
            raise SchemaError(f"{path}: `{key}` is not allowed in a CRD schema (or not supported here)")
    if "default" in node:
        if node["default"] is None:
            del node["default"]
        else:
            node["default"] = _without_nulls(node["default"])
    for bound, inclusive in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if bound in node and not isinstance(node[bound], bool):
            node[inclusive] = node.pop(bound)
            node[bound] = True
    if "description" in node:
        node["description"] = _description(node["description"])
    if node.get("type") == "string" and "enum" in node and "maxLength" not in node:
        # Bounds the CEL cost estimate of comparisons on the field.
        node["maxLength"] = max(len(value) for value in node["enum"])
    if "properties" in node:
        node.pop("additionalProperties", None)  # `false` is refused; unknown fields are pruned instead
        node["properties"] = {
            name: structural(prop, defs, f"{path}.{name}") for name, prop in node["properties"].items()
        }
    elif isinstance(node.get("additionalProperties"), dict):
        node["additionalProperties"] = structural(node["additionalProperties"], defs, f"{path}.*")
    if "items" in node:
        node["items"] = structural(node["items"], defs, f"{path}[]")
    if node.get("type") == "object" and isinstance(node.get("default"), dict) and node["default"]:
        # `{}` says the same when the nested defaults rebuild the whole value, and keeps the CRD short;
        # but the API server checks a default against the CEL rules without defaulting inside it first,
        # so an object under rules keeps its whole default.
        if not _has_rules(node) and apply_defaults({}, node) == node["default"]:
            node["default"] = {}
    if "x-kubernetes-validations" in node:
        node["x-kubernetes-validations"] = [_ordered(rule) for rule in node["x-kubernetes-validations"]]
    return _ordered(node)


def _has_rules(node: Any) -> bool:
    if isinstance(node, dict):
        return "x-kubernetes-validations" in node or any(_has_rules(v) for v in node.values())
    return False


def _ordered(node: dict[str, Any]) -> dict[str, Any]:
    rank = {key: i for i, key in enumerate(KEY_ORDER)}
    return dict(sorted(node.items(), key=lambda item: rank.get(item[0], len(rank))))


def _model_schema(model: type[pydantic.BaseModel]) -> dict[str, Any]:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    return structural(raw, raw.get("$defs", {}))


def spec_schema() -> dict[str, Any]:
    """The spec's schema, with the transition rules that make everything but MUTABLE_SPEC_FIELDS immutable."""
    schema = _model_schema(ExperimentSpec)
    schema["default"] = apply_defaults({}, schema)
    for name, prop in schema["properties"].items():
        if name in MUTABLE_SPEC_FIELDS:
            continue
        prop.setdefault("x-kubernetes-validations", []).append(rules.immutable(f"spec.{name}"))
        if "default" not in prop:
            schema.setdefault("x-kubernetes-validations", []).append(rules.immutable_presence(name))
    return schema


def openapi_schema() -> dict[str, Any]:
    """The whole resource's schema; metadata is left to the API server."""
    return {
        "type": "object",
        "description": _description(DistributedTrainingExperiment.__doc__ or ""),
        "properties": {
            "apiVersion": {"type": "string", "description": "apiVersion is ringleader.dev/v1alpha1."},
            "kind": {"type": "string", "description": "kind is DistributedTrainingExperiment."},
            "metadata": {"type": "object"},
            "spec": spec_schema(),
            "status": _model_schema(ExperimentStatus),
        },
    }


def crd() -> dict[str, Any]:
    """The CustomResourceDefinition object."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{constants.PLURAL}.{constants.GROUP}",
            "labels": {"app.kubernetes.io/name": "ringleader", "app.kubernetes.io/component": "crd"},
        },
        "spec": {
            "group": constants.GROUP,
            "names": {
                "kind": constants.KIND,
                "listKind": f"{constants.KIND}List",
                "plural": constants.PLURAL,
                "singular": constants.SINGULAR,
                "shortNames": list(constants.SHORT_NAMES),
                "categories": list(constants.CATEGORIES),
            },
            "scope": "Namespaced",
            "versions": [{
                "name": constants.VERSION,
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": openapi_schema()},
                "subresources": {"status": {}},
                "additionalPrinterColumns": PRINTER_COLUMNS,
            }],
        },
    }


class _Dumper(yaml.SafeDumper):
    """Writes repeated values out in full: the API server reads YAML anchors, but people and diffs should not have
    to."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def to_yaml(document: dict[str, Any] | None = None) -> str:
    """The CRD as the file in crds/ holds it (stable: same models, same bytes)."""
    body = yaml.dump(document or crd(), Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)
    return HEADER + body


def write(directories: list[pathlib.Path]) -> list[pathlib.Path]:
    text = to_yaml()
    written = []
    for directory in directories:
        directory.mkdir(parents=True, exist_ok=True)
        target = directory / FILE_NAME
        target.write_text(text)
        written.append(target)
    return written


def stale(directories: list[pathlib.Path]) -> list[str]:
    """A unified diff per directory whose CRD differs from what the models generate; empty when all are current."""
    expected = to_yaml()
    diffs = []
    for directory in directories:
        target = directory / FILE_NAME
        actual = target.read_text() if target.exists() else ""
        if actual != expected:
            diffs.append("".join(difflib.unified_diff(
                actual.splitlines(keepends=True), expected.splitlines(keepends=True),
                fromfile=str(target), tofile=f"{target} (generated)")))
    return diffs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ringleader.api.crd",
                                     description=" ".join(__doc__.split("\n\n")[0].split()))
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--out", action="append", type=pathlib.Path, metavar="DIR",
                        help=f"write DIR/{FILE_NAME} (repeatable)")
    action.add_argument("--check", nargs="+", type=pathlib.Path, metavar="DIR",
                        help="exit 1 with a diff if DIR's CRD is not what the models generate")
    action.add_argument("--docs", type=pathlib.Path, metavar="FILE",
                        help="rewrite the field reference of FILE (docs/api.md) from the models")
    args = parser.parse_args(argv)
    if args.docs:
        args.docs.write_text(reference.with_field_reference(args.docs.read_text(), openapi_schema()))
        print(f"wrote the field reference of {args.docs}")
        return 0
    if args.out:
        for target in write(args.out):
            print(f"wrote {target}")
        return 0
    diffs = stale(args.check)
    for diff in diffs:
        sys.stdout.write(diff or "(missing)\n")
    if diffs:
        print(f"the CRD is stale in {len(diffs)} place(s): run `make crds` and commit the result", file=sys.stderr)
        return 1
    print("CRD is up to date in " + ", ".join(str(d) for d in args.check))
    return 0


if __name__ == "__main__":
    sys.exit(main())

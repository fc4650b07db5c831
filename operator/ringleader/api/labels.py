"""Label keys and values, annotations and DNS names, as the API server checks them: defined once, for pydantic
(`ringleader validate`, the operator) and for the CRD's schema and CEL rules.

The rules are apimachinery's (IsQualifiedName, IsValidLabelValue, IsDNS1123Subdomain, ValidateAnnotations).
A value the API server would refuse in a pod (a nodeSelector, a toleration, a priority class name) is refused
here, before an experiment is created whose trials could never start. Patterns are anchored with ^ and $,
which match only at the ends of the text in the CRD's regular expressions (Go) and pydantic's (Rust): a
trailing newline is refused too. Python's `re` is only used with fullmatch, after the length is checked.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any

import pydantic
import pydantic_core

DNS_SUBDOMAIN_MAX_LENGTH = 253
NAME_PART_MAX_LENGTH = 63
"""The name part of a qualified name (after the optional prefix and '/'), and a DNS label."""
LABEL_VALUE_MAX_LENGTH = 63
LABEL_KEY_MAX_LENGTH = DNS_SUBDOMAIN_MAX_LENGTH + 1 + NAME_PART_MAX_LENGTH
ANNOTATIONS_MAX_BYTES = 256 * 1024
"""All annotations of an object together, keys and values, in bytes of UTF-8 (TotalAnnotationSizeLimitB)."""

_DNS_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = rf"{_DNS_LABEL}(\.{_DNS_LABEL})*"
_NAME_PART = f"[A-Za-z0-9]([-A-Za-z0-9_.]{{0,{NAME_PART_MAX_LENGTH - 2}}}[A-Za-z0-9])?"
DNS_SUBDOMAIN_PATTERN = f"^{_DNS_SUBDOMAIN}$"
QUALIFIED_NAME_PATTERN = f"^({_DNS_SUBDOMAIN}/)?{_NAME_PART}$"
"""A label key, annotation key or toleration key; with QUALIFIED_PREFIX_PATTERN, which bounds its prefix (the
API server counts the prefix and the name apart, which no single regular expression can)."""
QUALIFIED_PREFIX_PATTERN = f"^([^/]{{1,{DNS_SUBDOMAIN_MAX_LENGTH}}}/)?[^/]*$"
LABEL_VALUE_PATTERN = "^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"

_QUALIFIED_NAME_HINT = (f"an optional DNS subdomain of at most {DNS_SUBDOMAIN_MAX_LENGTH} characters and '/', "
                        f"then a name of at most {NAME_PART_MAX_LENGTH} letters, digits, '-', '_' and '.', "
                        "starting and ending with a letter or digit")
LABEL_KEY_HINT = f"a label key: {_QUALIFIED_NAME_HINT}"
ANNOTATION_KEY_HINT = f"an annotation key: {_QUALIFIED_NAME_HINT}, in either case"
# What each pattern means, for error messages (`experiment.problems_of`).
PATTERN_HINTS = {
    DNS_SUBDOMAIN_PATTERN: "a DNS subdomain: lower-case letters, digits, '-' and '.', starting and ending with a "
    "letter or digit",
    LABEL_VALUE_PATTERN: f"a label value: at most {LABEL_VALUE_MAX_LENGTH} letters, digits, '-', '_' and '.', "
    "starting and ending with a letter or digit, or empty",
}


def is_qualified_name(text: str) -> bool:
    """Whether `text` is a qualified name (IsQualifiedName): the length first, so no regular expression reads a
    long text."""
    return (len(text) <= LABEL_KEY_MAX_LENGTH and re.fullmatch(QUALIFIED_PREFIX_PATTERN, text) is not None
            and re.fullmatch(QUALIFIED_NAME_PATTERN, text) is not None)


def qualified_name_cel(variable: str) -> str:
    """CEL holding when `variable` is a qualified name; its length first, so the API server's regular expressions
    never read a long text."""
    return (f"size({variable}) <= {LABEL_KEY_MAX_LENGTH} && {variable}.matches({json.dumps(QUALIFIED_NAME_PATTERN)}) "
            f"&& {variable}.matches({json.dumps(QUALIFIED_PREFIX_PATTERN)})")


def _label_key(text: str) -> str:
    if not is_qualified_name(text):
        raise pydantic_core.PydanticCustomError("label_key", f"must be {LABEL_KEY_HINT}")
    return text


LabelValue = Annotated[str, pydantic.StringConstraints(max_length=LABEL_VALUE_MAX_LENGTH, pattern=LABEL_VALUE_PATTERN)]
DnsSubdomain = Annotated[str, pydantic.StringConstraints(max_length=DNS_SUBDOMAIN_MAX_LENGTH,
                                                         pattern=DNS_SUBDOMAIN_PATTERN)]
_MapKey = Annotated[str, pydantic.AfterValidator(_label_key), pydantic.WithJsonSchema({"type": "string"})]


def label_key(field: str) -> Any:
    """A qualified name as a field (a toleration's key), `field` in messages. The schema says it with a pattern,
    a length and a CEL rule for the prefix's length; pydantic with one check and one message."""
    return Annotated[str, pydantic.AfterValidator(_label_key), pydantic.WithJsonSchema({
        "type": "string", "maxLength": LABEL_KEY_MAX_LENGTH, "pattern": QUALIFIED_NAME_PATTERN,
        "x-kubernetes-validations": [{"rule": f"self.matches({json.dumps(QUALIFIED_PREFIX_PATTERN)})",
                                      "message": f"`{field}` must be {LABEL_KEY_HINT}: shorten the prefix before '/'"}],
    })]


def label_map(field: str | None = None, max_labels: int | None = None) -> Any:
    """A map of labels (labels, or a nodeSelector): keys and values as ValidateLabels checks them.

    A CRD schema cannot constrain a map's keys: `field` (its name in messages, `scheduling.nodeSelector`)
    gets a CEL rule that checks them."""
    rules = [] if field is None else [{"rule": f"self.all(k, {qualified_name_cel('k')})",
                                       "message": f"`{field}` keys must each be {LABEL_KEY_HINT}: rename the key"}]
    extra: dict[str, Any] | None = {"x-kubernetes-validations": rules} if rules else None
    return Annotated[dict[_MapKey, LabelValue], pydantic.Field(max_length=max_labels, json_schema_extra=extra)]


def _annotation_key(key: str) -> str:
    # Case does not matter in annotation keys: the API server checks them lower-cased.
    if not is_qualified_name(key.lower()):
        raise pydantic_core.PydanticCustomError("annotation_key", f"must be {ANNOTATION_KEY_HINT}")
    return key


def _annotations_size(annotations: dict[str, str]) -> dict[str, str]:
    size = sum(len(text.encode("utf-8", "surrogatepass")) for pair in annotations.items() for text in pair)
    if size > ANNOTATIONS_MAX_BYTES:
        raise pydantic_core.PydanticCustomError(
            "annotations_size", f"must hold at most {ANNOTATIONS_MAX_BYTES} bytes, keys and values together, as the "
            f"API server counts them (got {size}): keep large data out of annotations")
    return annotations


Annotations = Annotated[dict[Annotated[str, pydantic.AfterValidator(_annotation_key)], str],
                        pydantic.AfterValidator(_annotations_size)]

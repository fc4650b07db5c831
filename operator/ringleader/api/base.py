"""The base of every API model: camelCase on the wire, unknown keys refused, rules checked and published."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

import pydantic
import pydantic.alias_generators
import pydantic_core

from ringleader.api.rules import Rule


# Strict scalars, as the API server's schema validation takes them: "30" is no integer, true no integer,
# "0.5" no number ("yes", "on" and "y" stay booleans: kubectl reads them as true). A number may be integral.
Integer = Annotated[int, pydantic.Strict()]
Number = Annotated[float, pydantic.Strict()]
Boolean = Annotated[bool, pydantic.Strict()]

WITHOUT_RULES = "ringleader.withoutRules"
"""Validation context key: check fields only (problems.hidden_rules checks the rules itself, noting what they read)."""

MAX_SECONDS = 2**31 - 1
"""The longest duration a field takes (68 years): every timer of the runtime, the operator and torch holds it."""


def _publish_rules(schema: dict[str, Any], model: type[ApiModel]) -> None:
    validations = [rule.schema() for rule in model.rules]
    if validations:
        schema["x-kubernetes-validations"] = validations


def list_map(*keys: str) -> dict[str, Any]:
    """Schema extras of a list keyed by `keys`: server-side apply merges its items by key, and keys stay unique."""
    return {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": list(keys)}


class ApiModel(pydantic.BaseModel):
    """Frozen, so a resolved trial is a value; attribute docstrings become the CRD's descriptions."""

    model_config = pydantic.ConfigDict(
        alias_generator=pydantic.alias_generators.to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
        json_schema_extra=_publish_rules,
    )

    rules: ClassVar[tuple[Rule, ...]] = ()

    @classmethod
    def wire_name(cls, name: str) -> str:
        """A field's name in YAML and the CRD: its camelCase alias (its own name where it has none)."""
        return cls.model_fields[name].alias or name

    @pydantic.model_validator(mode="after")
    def _check_rules(self, info: pydantic.ValidationInfo) -> ApiModel:
        if info.context and info.context.get(WITHOUT_RULES):
            return self
        # Report every broken rule at once, each at its field, so one `validate` run shows all fixes.
        broken = [
            pydantic_core.InitErrorDetails(
                type=pydantic_core.PydanticCustomError("rule", rule.message.replace("{", "(").replace("}", ")")),
                loc=tuple(part for part in rule.field_path.split(".") if part),
                input=None,
            )
            for rule in type(self).rules
            if not rule.holds(self)
        ]
        if broken:
            raise pydantic.ValidationError.from_exception_data(type(self).__name__, broken)
        return self

    def wire(self) -> dict[str, Any]:
        """The object as it appears in a CR: camelCase keys, unset optional fields left out."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


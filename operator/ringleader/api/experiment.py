"""The DistributedTrainingExperiment resource as a whole, read from a file or a CR body, with readable errors."""

from __future__ import annotations

import pathlib
import re
from typing import Annotated, Any, Literal, Sequence

import pydantic
import pydantic_core

from ringleader.api import constants, loading, reading
from ringleader.api.labels import Annotations, DnsSubdomain, label_map
from ringleader.api import problems
from ringleader.api.problems import Problem, hidden_rules
from ringleader.api import spec as spec_
from ringleader.api.spec import ExperimentSpec
from ringleader.api.status import ExperimentStatus

NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"

# What each pattern means, for error messages; a regular expression is not a fix.
PATTERN_HINTS = {
    **spec_.PATTERN_HINTS,
    NAME_PATTERN: "a DNS label: lower-case letters, digits and '-', starting and ending with a letter or digit",
}


class Metadata(pydantic.BaseModel):
    """The part of ObjectMeta that ringleader reads, or checks as the API server does (labels, annotations);
    the rest is kept but not interpreted."""

    model_config = pydantic.ConfigDict(extra="allow", frozen=True)

    # The API server accepts any DNS subdomain as a custom resource's name; trials derive DNS labels from it.
    name: DnsSubdomain
    namespace: Annotated[str, pydantic.StringConstraints(pattern=NAME_PATTERN, max_length=63)] = "default"
    uid: str | None = None
    generation: int | None = None
    labels: label_map() = {}
    annotations: Annotations = {}


class DistributedTrainingExperiment(pydantic.BaseModel):
    """DistributedTrainingExperiment runs a distributed-training job (parameter server, peer-to-peer or ring
    allreduce, under BSP, ASP, SSP or DSSP), or a sweep of them, and records per-iteration timings in MLflow."""

    model_config = pydantic.ConfigDict(populate_by_name=True, extra="forbid", frozen=True)

    api_version: Literal["ringleader.dev/v1alpha1"] = pydantic.Field(constants.API_VERSION, alias="apiVersion")
    kind: Literal["DistributedTrainingExperiment"] = constants.KIND
    metadata: Metadata
    spec: ExperimentSpec = ExperimentSpec()
    status: ExperimentStatus | None = None

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace

    def mlflow_experiment_name(self) -> str:
        return mlflow_experiment_name(self.namespace, self.name, self.spec)


def mlflow_experiment_name(namespace: str, name: str, spec: ExperimentSpec) -> str:
    """The MLflow experiment an experiment's runs go to; its trials' ranks look their run up there."""
    return spec.tracking.experiment_name or f"{namespace}/{name}"


class SpecError(ValueError):
    """An experiment file or CR is invalid; `problems` lists each as 'path: what to change' (a problems.Problem)."""

    def __init__(self, source: str, problems: Sequence[str | Problem]):
        self.source = source
        self.problems = [p if isinstance(p, Problem) else Problem(None, p) for p in problems]
        super().__init__(f"{source}: invalid\n" + "\n".join(f"  - {p}" for p in self.problems))


MAX_PROBLEMS = 20
"""Problems listed at most: a file of a thousand typos is fixed a screenful at a time."""


def problems_of(error: pydantic.ValidationError, hidden: Sequence[tuple[tuple, str]] = ()) -> list[Problem]:
    """Pydantic errors in the API's own wording: "`spec.workers.replicas` must be greater than or equal to 1",
    then the `hidden` rules (problems.hidden_rules) that pydantic did not report itself."""
    problems = [_problem(item) for item in error.errors()]
    problems += [problem for problem in (_broken_rule(location, message) for location, message in hidden)
                 if problem not in problems]
    if len(problems) > MAX_PROBLEMS:
        more = len(problems) - MAX_PROBLEMS
        problems = problems[:MAX_PROBLEMS] + [Problem(None, f"... and {more} more problems: fix these first")]
    return problems


def _broken_rule(location: tuple, message: str) -> Problem:
    path = ".".join(loading.shorten_end(str(part), 60) for part in location)
    # A rule's message names its fields itself ("`sync.maxStaleness` is required when ..."): not the path again.
    return Problem(path, message, line=message if "`" in message else f"{path}: {message}")


def _problem(item: pydantic_core.ErrorDetails) -> Problem:
    if item["type"] == "rule":
        return _broken_rule(item["loc"], item["msg"])
    location = item["loc"]
    key = location[-1:] == ("[key]",)  # a map's key in error: the map is named, the key quoted
    if key:
        location = location[:-2]
    path = ".".join(loading.shorten_end(str(part), 60) for part in location)
    message = re.sub(r"^(Input|String|List|Dictionary|Object) should", "must", item["msg"].replace("Value error, ", ""))
    if item["type"] == "string_pattern_mismatch":
        pattern = item.get("ctx", {}).get("pattern", "")
        message = f"must be {PATTERN_HINTS.get(pattern, f'a string matching {pattern}')}"
    if item["type"] == "extra_forbidden":
        near = problems.suggestion(location[-1], problems.field_names(DistributedTrainingExperiment, location[:-1]))
        # A known field at the wrong level (`groups:` indented under `spec`, not `spec.workers`): where it goes.
        top = f"{location[0]}."  # spec's fields have homes under spec only
        elsewhere = [home for home in problems.homes(DistributedTrainingExperiment, str(location[-1]))
                     if home.startswith(top) and home != problems.dotted(location[:-1])][:3]
        if elsewhere and not near:
            near = "; it belongs under " + " or ".join(f"`{home}`" for home in elsewhere) + " (check its indentation)"
        message = "is not a field of this object" + (near or ": check its spelling (fields are camelCase)")
    elif item["type"] == "missing":
        message = "is required"
    got = item.get("input")
    shown = item["type"] not in ("extra_forbidden", "missing") and not isinstance(got, dict)
    if key:
        return Problem(path, f"key {loading.shorten_end(repr(got), 80)} {message}")
    detail = f" (got {loading.shorten_end(repr(got), 80)})" if shown else ""
    if item["type"] in ("enum", "literal_error"):  # a misspelt value: the allowed one it is closest to
        detail += problems.suggestion(got, re.findall(r"'([^']*)'", str(item.get("ctx", {}).get("expected", ""))))
    elif item["type"] == "string_pattern_mismatch" and item.get("ctx", {}).get("pattern") == spec_.MODEL_PATTERN:
        detail += problems.suggestion(got, spec_.BUILTIN_MODELS)  # a misspelt built-in ("mpl"), not a factory
    return Problem(path, message + detail)


def parse(document: Any, source: str = "experiment") -> DistributedTrainingExperiment:
    """Validate a CR body (a dict) against the models, or raise SpecError listing every problem, the
    cross-field rules that field errors hid included."""
    if not isinstance(document, dict):
        raise SpecError(source, ["the document must be a mapping with apiVersion, kind, metadata and spec"])
    try:
        # Wire names only, as the API server sees them: `batch_size` in a file is a typo there, so here too.
        return DistributedTrainingExperiment.model_validate(document, by_alias=True, by_name=False)
    except pydantic.ValidationError as error:
        hidden = hidden_rules(DistributedTrainingExperiment, document, error)
        raise SpecError(source, problems_of(error, hidden)) from None


def load(path: str | pathlib.Path) -> DistributedTrainingExperiment:
    """Read one experiment from a YAML file ('-': standard input); LoadError when it is no YAML to take. Each
    problem starts with its line in the file ("line 12: `spec.workers.replicas` must be ...")."""
    documents = loading.load_documents_with_nodes(str(path))
    source = reading.display_name(str(path))
    if len(documents) != 1:
        raise loading.LoadError(source, f"holds {len(documents)} YAML documents: an experiment file holds exactly one")
    document, root = documents[0]
    try:
        return parse(document, source)
    except SpecError as error:
        lines = loading.Lines(root)
        raise SpecError(source, [_at_line(problem, lines) for problem in error.problems]) from None


def _at_line(problem: Problem, lines: loading.Lines) -> Problem:
    line = lines.of(problem.field)
    if line is None:
        return problem
    return Problem(problem.field, problem.message, line=f"line {line}: {problem}")

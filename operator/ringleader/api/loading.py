"""Experiment files read as the API server would take them, whatever they hold; experiment.load calls it.

A file may be huge, binary, not UTF-8, a directory, an alias bomb, nested a million levels deep or
full of duplicate keys: each ends in one LoadError line naming the file and the problem, within a
bounded time and memory, and echoing at most SHOWN characters of the input. The file's bytes and
their decoding are reading.py's (regular file, FIFO or standard input, bounded); this is the YAML.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
import yaml.composer
import yaml.constructor
import yaml.nodes
import yaml.resolver

from ringleader.api import reading

MAX_DEPTH = 100
"""Nesting levels of a document; an experiment needs fewer than 10."""
MAX_VALUES = 50_000
"""Values (scalars, lists and mappings) of a file, aliases expanded: far above any experiment, even one
copied with its status from `kubectl get -o yaml`, and far below what takes a second to load."""
MAX_NUMBER_LENGTH = 100
"""Characters of a number: every number the API takes fits in 20; Python refuses 4300-digit integers."""
SHOWN = 200
"""Characters of a problem shown at most, so that an error never echoes the input back at length."""

_TOO_DEEP = f"nested deeper than {MAX_DEPTH} levels"
_TOO_DEEP_FIX = "an experiment needs fewer than 10"
_LIBRARY_DEPTH_LIMIT = "nesting depth"


class LoadError(ValueError):
    """A file that is no YAML document the API server would take; str() is one line: '<file>: <problem>'.
    `excerpt` is where in the file, when a parser said so: the line, and a caret under the column."""

    def __init__(self, source: str, problem: str, excerpt: str = ""):
        self.source = source
        self.problem = shorten_end(problem)
        self.excerpt = excerpt
        super().__init__(f"{source}: {self.problem}")

    def shown(self) -> str:
        """The refusal as every command prints it: its line, then the excerpt under it."""
        return f"{self}\n{self.excerpt}" if self.excerpt else str(self)


def shorten_end(text: str, limit: int = SHOWN) -> str:
    """`text` on one line, cut to `limit` characters with a marker saying so."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    marker = f"... ({len(text)} chars)"
    return text[: limit - len(marker)] + marker


def load_documents(path: str) -> list[Any]:
    """The non-empty YAML documents of the file at `path` ('-': standard input), or LoadError."""
    return [document for document, _ in load_documents_with_nodes(path)]


def load_documents_with_nodes(path: str) -> list[tuple[Any, yaml.nodes.Node]]:
    """load_documents, each document with its composed node: where a problem with a field is (Lines)."""
    source = reading.display_name(path)
    try:
        text = reading.decode(reading.read(path), "YAML text", say_line=True)
    except reading.ReadError as error:
        raise LoadError(source, error.problem) from None
    documents = []
    try:
        loader = _BoundedLoader(text)  # PyYAML's own reader refuses unprintable characters here
        try:
            while loader.check_data():
                documents.append(loader.get_data())
        finally:
            loader.dispose()
    except yaml.reader.ReaderError as error:
        raise LoadError(source, _unacceptable(error, text)) from None
    except yaml.YAMLError as error:
        raise LoadError(source, _describe(error), excerpt(error, text)) from None
    return [(document, node) for document, node in zip(documents, loader.roots) if document is not None]


class Lines:
    """Where each field of one composed document is: `of("spec.workers.replicas")` is its line (1-based). Each object
    on a path asked for is indexed once, so that the problems of a file of thousands of keys cost its size once."""

    def __init__(self, root: yaml.nodes.Node):
        self._root = root
        self._children: dict[int, dict[str, tuple[int, yaml.nodes.Node]]] = {}

    def _index(self, node: yaml.nodes.Node) -> dict[str, tuple[int, yaml.nodes.Node]]:
        found = self._children.get(id(node))
        if found is None:
            found = {}
            if isinstance(node, yaml.MappingNode):
                for key, value in node.value:
                    if isinstance(key, yaml.ScalarNode):
                        found.setdefault(shorten_end(str(key.value), 60), (key.start_mark.line + 1, value))
            elif isinstance(node, yaml.SequenceNode):
                for index, item in enumerate(node.value):
                    found[str(index)] = (item.start_mark.line + 1, item)
            self._children[id(node)] = found
        return found

    def of(self, field: str | None) -> int | None:
        """The line of `field` (a dotted path as problems name fields, each part cut as `shorten_end(part, 60)` cuts
        it; a key may hold dots itself), or of the deepest object on its path the file has: a missing field is reported
        where its object is."""
        node, rest, line = self._root, field or "", None
        while rest:
            children = self._index(node)
            part = next((p for p in _prefixes(rest) if p in children), None)
            if part is None:
                break
            line, node = children[part]
            rest = rest[len(part) + 1:]
        return line


def _prefixes(path: str) -> list[str]:
    """"a.b.c" -> ["a", "a.b", "a.b.c"]: the keys a path may start with, a key with dots of its own included."""
    parts = path.split(".")
    return [".".join(parts[:n]) for n in range(1, len(parts) + 1)]


def _unacceptable(error: yaml.reader.ReaderError, text: str) -> str:
    """A character YAML refuses (control characters, U+FFFE), and where: libyaml counts bytes, PyYAML characters."""
    before = text[:error.position] if _Parser is _PythonParser else \
        text.encode()[:error.position].decode(errors="ignore")
    line, column = before.count("\n") + 1, len(before) - before.rfind("\n")
    code = error.character if isinstance(error.character, int) else ord(error.character)
    return (f"not valid YAML: the character U+{code:04X} at line {line}, column {column} is not allowed in YAML: "
            "remove it")


EXCERPT_WIDTH = 100
"""Characters of a line shown at most around the column: a minified file's one line is not echoed whole."""
OPENED_NEARBY = 3
"""Lines back at most that a collection still open is shown from: further up, the caret's own line says enough."""


def excerpt(error: yaml.YAMLError, text: str) -> str:
    """The lines of `text` a parser's error points at, numbered, with a caret under the column. Where a flow
    collection opened a line or few above is what was left open (a missing '}'), its line and caret come first:
    the parser notices on the next line, the mistake is on that one. "" when the error has no place."""
    if not isinstance(error, yaml.MarkedYAMLError) or error.problem_mark is None:
        return ""
    lines = text.splitlines()
    problem, context = error.problem_mark, error.context_mark
    marks = [context, problem] if context is not None and _nearby(error) else [problem]
    width = len(str(problem.line + 1))
    shown = []
    for mark in marks:
        if mark.line >= len(lines):
            continue
        line, column = _window(lines[mark.line], mark.column)
        under = "".join(c if c == "\t" else " " for c in line[:column])  # tabs kept: the caret lines up with them
        shown.append(f"  {mark.line + 1:>{width}} | {line}")
        shown.append(f"  {'':>{width}} | {under}^")
    return "\n".join(shown)


def _nearby(error: yaml.MarkedYAMLError) -> bool:
    """Whether the error is about a bracket or quote left open a line or few above (not an indented block: the
    block it names encloses the mistake, it did not cause it)."""
    problem, context = error.problem_mark, error.context_mark
    return (problem is not None and context is not None and "block" not in (error.context or "")
            and 0 < problem.line - context.line <= OPENED_NEARBY)


def _window(line: str, column: int) -> tuple[str, int]:
    """At most EXCERPT_WIDTH printable characters of `line` around `column`, and the column within them."""
    line = "".join(c if c.isprintable() or c == "\t" else "?" for c in line)
    start = max(0, min(column - EXCERPT_WIDTH // 2, len(line) - EXCERPT_WIDTH))
    end = start + EXCERPT_WIDTH
    cut = ("..." if start else "") + line[start:end] + ("..." if end < len(line) else "")
    return cut, column - start + (3 if start else 0)


def _opened(error: yaml.MarkedYAMLError) -> str:
    """ " (a flow mapping opened at line 29, column 16)" where a collection left open a line or few above is what
    the parser could not close: the line it names is the one after the mistake."""
    what = (error.context or "").removeprefix("while parsing ").removeprefix("while scanning ")
    mark = error.context_mark
    if not what or mark is None or not _nearby(error):
        return ""
    return f" ({what} opened at line {mark.line + 1}, column {mark.column + 1})"


INDENTATION_PROBLEMS = ("did not find expected key", "mapping values are not allowed", "did not find expected '-'",
                        "could not find expected ':'")
"""What PyYAML and libyaml say when a line is indented one step off (a key between two levels, a value indented
as if it opened a mapping): the place they name is that line."""
INDENTATION_HINT = ": check its indentation against the lines above (a key sits in its mapping's column)"


def _describe(error: yaml.YAMLError) -> str:
    """A YAML error on one line: what, and where (line and column, counted from 1)."""
    if isinstance(error, _Refused):
        return error.problem
    if isinstance(error, yaml.MarkedYAMLError):
        mark = error.problem_mark or error.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        if _LIBRARY_DEPTH_LIMIT in (error.problem or ""):
            # libyaml (PyYAML >= 6.0.4) reads flow brackets ahead and refuses 1000 levels before the
            # composer counts 100: the same refusal, said in the same words whichever layer noticed.
            return f"{_TOO_DEEP}{where}: {_TOO_DEEP_FIX}"
        what = error.problem or error.context or "unreadable"
        hint = INDENTATION_HINT if any(said in what for said in INDENTATION_PROBLEMS) else ""
        return f"not valid YAML: {what}{where}{_opened(error)}{hint}"
    return f"not valid YAML: {str(error).splitlines()[0] if str(error) else type(error).__name__}"


class _Refused(yaml.MarkedYAMLError):
    """YAML that parses but that the API server refuses, or that would cost too much to take."""

    problem: str

    def __init__(self, what: str, node_or_event: Any, fix: str):
        mark = node_or_event.start_mark
        super().__init__(problem=f"{what} at line {mark.line + 1}, column {mark.column + 1}: {fix}", problem_mark=mark)


class _BoundedComposer(yaml.composer.Composer):
    """The composer, counting values (aliases expanded) and nesting as it goes, before anything is built.

    Every node records its `size` (values in it, aliases expanded) and `height` (levels in it), so an
    alias costs what it expands to: a billion laughs is refused at its first few lines."""

    def __init__(self) -> None:
        super().__init__()
        self._values = 0
        self._depth = 0
        self._deepest = 0

    def compose_document(self) -> yaml.nodes.Node | None:
        self._count(1, self.peek_event())
        return super().compose_document()

    def compose_node(self, parent: Any, index: Any) -> yaml.nodes.Node | None:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            node = self.anchors.get(event.anchor)
            if node is not None:
                if not hasattr(node, "height"):
                    raise _Refused(f"alias *{shorten_end(str(event.anchor), 40)} inside the node it names", event,
                                  "a structure without end, which JSON cannot hold; copy the values instead")
                self._enter(node.height, event)
                self._count(node.size, event)
            return super().compose_node(parent, index)
        depth, values = self._depth + 1, self._values
        self._enter(1, event)
        self._count(1, event)
        saved, self._depth, self._deepest = self._deepest, depth, depth
        node = super().compose_node(parent, index)
        assert node is not None, "PyYAML composes a node for every event but an alias"
        node.height = self._deepest - depth + 1
        node.size = self._values - values
        self._depth, self._deepest = depth - 1, max(saved, self._deepest)
        return node

    def _enter(self, height: int, event: Any) -> None:
        deepest = self._depth + height
        if deepest > MAX_DEPTH:
            raise _Refused(_TOO_DEEP, event, _TOO_DEEP_FIX)
        self._deepest = max(self._deepest, deepest)

    def _count(self, values: int, event: Any) -> None:
        self._values += values
        if self._values > MAX_VALUES:
            raise _Refused(f"more than {MAX_VALUES} values (aliases expanded)", event,
                          "an experiment has a few hundred; is this the right file?")


class _StrictConstructor(yaml.constructor.SafeConstructor):
    """SafeConstructor refusing what the API server refuses (duplicate keys) and numbers no field can take."""

    # The booleans of _KubectlResolver: go-yaml's, y and n besides PyYAML's.
    bool_values = {**yaml.constructor.SafeConstructor.bool_values, "y": True, "n": False}

    roots: list[yaml.nodes.Node]
    """The composed node of each document constructed, in order (load_documents_with_nodes)."""

    def __init__(self) -> None:
        super().__init__()
        self.roots = []

    def construct_document(self, node: yaml.nodes.Node) -> Any:
        self.roots.append(node)
        return super().construct_document(node)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        first: dict[Any, yaml.nodes.Node] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node)
            try:
                earlier = first.setdefault(key, key_node)
            except TypeError:
                continue  # unhashable: the constructor below says so
            if earlier is not key_node:
                raise _Refused(f"duplicate key {shorten_end(repr(key), 60)}", key_node,
                              f"also at line {earlier.start_mark.line + 1}; the API server refuses repeated keys: "
                              "keep one")
        return super().construct_mapping(node, deep)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        self._check_number_length(node)
        return super().construct_yaml_int(node)

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        self._check_number_length(node)
        return super().construct_yaml_float(node)

    @staticmethod
    def _check_number_length(node: yaml.ScalarNode) -> None:
        if len(node.value) > MAX_NUMBER_LENGTH:
            raise _Refused(f"a number of {len(node.value)} characters", node,
                          f"no field takes one longer than {MAX_NUMBER_LENGTH}")


_StrictConstructor.add_constructor("tag:yaml.org,2002:int", _StrictConstructor.construct_yaml_int)
_StrictConstructor.add_constructor("tag:yaml.org,2002:float", _StrictConstructor.construct_yaml_float)


class _KubectlResolver(yaml.resolver.BaseResolver):
    """Plain scalars typed as kubectl types them before it sends JSON (sigs.k8s.io/yaml, on go-yaml v2).

    PyYAML's YAML 1.1 resolver also reads base 60 (`iterations: 1:00` as 60, `1:30.5` as 90.5) and dates
    (`2024-01-01` as a date), which go-yaml leaves strings, so the API server would refuse `1:00` for an
    integer; it reads `=` as a tag no constructor builds, and `y` and `n` as strings where go-yaml reads
    booleans. Here those are as kubectl has them. Kept as PyYAML has them: `yes`, `no`, `on` and `off`
    (booleans for go-yaml too), octal `010` (8 for both), and what kubectl reads as a number but PyYAML as a
    string (`1e5`, `0o10`, `09`): refused either way where a field wants an integer written as one."""


_KubectlResolver.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$"),
    list("yYnNtTfFoO"))
_KubectlResolver.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
                   |\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
                   |[-+]?\.(?:inf|Inf|INF)
                   |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."))
_KubectlResolver.add_implicit_resolver(
    "tag:yaml.org,2002:int",
    re.compile(r"""^(?:[-+]?0b[0-1_]+
                   |[-+]?0[0-7_]+
                   |[-+]?(?:0|[1-9][0-9_]*)
                   |[-+]?0x[0-9a-fA-F_]+)$""", re.X),
    list("-+0123456789"))
_KubectlResolver.add_implicit_resolver("tag:yaml.org,2002:merge", re.compile(r"^(?:<<)$"), ["<"])
_KubectlResolver.add_implicit_resolver(
    "tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""])


class _PythonParser(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser):
    """PyYAML's own reader, scanner and parser, where libyaml is not installed."""

    def __init__(self, text: str):
        yaml.reader.Reader.__init__(self, text)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)


try:
    # libyaml's parser where it is installed: a 3 MiB file parses in milliseconds, not seconds.
    from yaml.cyaml import CParser as _Parser
except ImportError:
    _Parser = _PythonParser


class _BoundedLoader(_BoundedComposer, _Parser, _StrictConstructor, _KubectlResolver):
    """The bounded composer first in the method order, so it, not libyaml's own, builds the nodes."""

    def __init__(self, text: str):
        _Parser.__init__(self, text)
        _BoundedComposer.__init__(self)
        _StrictConstructor.__init__(self)
        _KubectlResolver.__init__(self)

"""One name per meaning: no class name is defined at module level in two modules of the package.

A reader who meets `Nic` or `Verdict` should not have to ask which one; docs/architecture.md names classes by
their module, and a name defined twice makes that ambiguous. The spec's own types (api/spec.py) keep their names:
they are the public schema, so another module's class takes a name that says what it is instead.
"""

from __future__ import annotations

import ast
import collections
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "operator" / "ringleader"


def classes_defined_twice(root: pathlib.Path) -> dict[str, list[str]]:
    """Each class name defined at module level in more than one module under `root`, with those modules."""
    found: dict[str, list[str]] = collections.defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        module = path.relative_to(root).as_posix()
        for node in ast.parse(path.read_text(), filename=str(path)).body:
            if isinstance(node, ast.ClassDef):
                found[node.name].append(module)
    return {name: modules for name, modules in found.items() if len(modules) > 1}


def test_no_class_name_is_defined_in_two_modules():
    twice = classes_defined_twice(PACKAGE)
    assert not twice, "; ".join(f"{name} in {' and '.join(modules)}" for name, modules in sorted(twice.items()))


def test_a_class_defined_in_two_modules_is_found_naming_both(tmp_path):
    (tmp_path / "runtime").mkdir()
    (tmp_path / "runtime" / "nic.py").write_text("class Card:\n    pass\n")
    (tmp_path / "models.py").write_text("def f():\n    class Card:\n        pass\n\n\nclass Card:\n    pass\n")
    (tmp_path / "other.py").write_text("class Only:\n    pass\n")
    assert classes_defined_twice(tmp_path) == {"Card": ["models.py", "runtime/nic.py"]}

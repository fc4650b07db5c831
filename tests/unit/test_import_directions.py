"""Packages depend one way, along the data's flow: spec -> contract -> rendering, models -> planning -> report ->
tracking -> ranks -> operator, launcher -> the other commands' front ends.

Read from the source (every import, module-level or inside a function), so a new import against the
flow fails here before it makes a cycle; and each of api/variants.py's enums is taken from there alone. The report
is the one package imported only inside functions (by tracking, which publishes it): a rank imports tracking, and
must not load matplotlib.
"""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "operator" / "ringleader"

# What each package may import of ringleader besides itself.
ALLOWED = {
    "api": set(),
    "contract": {"api"},
    "topology": {"api", "contract"},
    "models": {"api", "contract"},
    "planning": {"api", "contract", "models"},
    "report": {"api", "contract", "models", "planning"},
    "tracking": {"api", "contract", "models", "report"},
    "runtime": {"api", "contract", "models", "tracking"},
    "launch": {"api", "contract", "models", "report", "tracking", "topology"},
    "controller": {"api", "contract", "models", "tracking", "topology"},
    "commands": {"api", "contract", "models", "report", "tracking", "planning", "launch"},
}
# Of those, what a package may import only inside a function (or for its types alone, under TYPE_CHECKING).
LAZY_ONLY = {"tracking": {"report"}}
# Third-party packages a package must not import at all; matplotlib is the report's alone.
HEAVY = ("torch", "matplotlib", "mlflow")
FORBIDDEN = {"models": set(HEAVY), **{package: {"matplotlib"} for package in ALLOWED if package != "report"}}


def imported_packages(path: pathlib.Path) -> set[str]:
    return imported_packages_of(ast.parse(path.read_text()))


def imported_packages_of(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "ringleader" and len(parts) > 1 and (PACKAGE / parts[1]).is_dir():
                found.add(parts[1])
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_package_imports_only_the_packages_upstream_of_it(package):
    wrong = {}
    for path in sorted((PACKAGE / package).rglob("*.py")):
        against = imported_packages(path) - ALLOWED[package] - {package}
        if against:
            wrong[str(path.relative_to(PACKAGE))] = sorted(against)
    assert wrong == {}


def _module_level_imports(tree: ast.Module) -> list[ast.stmt]:
    """The import statements that run when the module is imported: not inside a function nor under TYPE_CHECKING."""
    found: list[ast.stmt] = []
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.If) and not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
            pending += node.body + node.orelse
        elif isinstance(node, (ast.Try, ast.With, ast.ClassDef)):
            pending += [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", []),
                        *[s for handler in getattr(node, "handlers", []) for s in handler.body]]
    return found


@pytest.mark.parametrize("package", sorted(LAZY_ONLY))
def test_a_package_imports_what_would_load_matplotlib_only_inside_a_function(package):
    eager = {}
    for path in sorted((PACKAGE / package).rglob("*.py")):
        module = ast.Module(body=_module_level_imports(ast.parse(path.read_text())), type_ignores=[])
        against = imported_packages_of(module) & LAZY_ONLY[package]
        if against:
            eager[str(path.relative_to(PACKAGE))] = sorted(against)
    assert eager == {}


def _third_party(path: pathlib.Path) -> set[str]:
    """The top-level names of what `path` imports, module-level or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_the_models_import_no_torch_matplotlib_or_mlflow_and_only_the_report_imports_matplotlib(package):
    wrong = {str(path.relative_to(PACKAGE)): sorted(_third_party(path) & FORBIDDEN[package])
             for path in sorted((PACKAGE / package).rglob("*.py")) if _third_party(path) & FORBIDDEN[package]}
    assert wrong == {}


def test_no_module_outside_the_packages_imports_matplotlib():
    loose = [path.name for path in PACKAGE.glob("*.py") if "matplotlib" in _third_party(path)]
    assert loose == []


def test_every_package_has_a_place_in_the_flow():
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages == set(ALLOWED)


def test_importing_the_contract_loads_neither_torch_nor_kopf_nor_mlflow():
    code = ("import sys, pkgutil, importlib, ringleader.contract as c\n"
            "for m in pkgutil.iter_modules(c.__path__): importlib.import_module('ringleader.contract.' + m.name)\n"
            "print(' '.join(sorted(n for n in ('torch', 'kopf', 'mlflow') if n in sys.modules)))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env={"PYTHONPATH": str(PACKAGE.parent)}).stdout.strip()
    assert loaded == ""


def test_reading_trackings_settings_and_schema_does_not_import_mlflow():
    """The operator and the CLI read them at startup; MLflow's import takes seconds and only calls need it."""
    code = ("import sys, ringleader.tracking.settings, ringleader.tracking.schema\n"
            "print(' '.join(sorted(n for n in ('torch', 'kopf', 'mlflow') if n in sys.modules)))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env={"PYTHONPATH": str(PACKAGE.parent)}).stdout.strip()
    assert loaded == ""


def _module_imports(path: pathlib.Path) -> set[str]:
    """The ringleader modules `path` imports, module-level or inside a function ("tracking.reading")."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("ringleader."):
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"[len("ringleader."):]
                found.add(candidate if (PACKAGE / (candidate.replace(".", "/") + ".py")).exists()
                          else node.module[len("ringleader."):])
    return found


def test_no_two_modules_import_each_other_not_even_through_a_lazy_import():
    modules = {str(p.relative_to(PACKAGE).with_suffix("")).replace("/", "."): p for p in PACKAGE.rglob("*.py")}
    imports = {name: _module_imports(path) for name, path in modules.items()}
    mutual = sorted({tuple(sorted((a, b))) for a, targets in imports.items() for b in targets
                     if b != a and a in imports.get(b, set())})
    assert mutual == []


ROOT = PACKAGE.parents[1]
VARIANTS = "ringleader.api.variants"


def _variants_enums() -> set[str]:
    """The enums api/variants.py defines (its classes deriving from enum.Enum), read from its source."""
    tree = ast.parse((PACKAGE / "api" / "variants.py").read_text())
    return {node.name for node in tree.body if isinstance(node, ast.ClassDef)
            and any(isinstance(base, ast.Attribute) and base.attr == "Enum" for base in node.bases)}


def _dotted(node: ast.expr, modules: dict[str, str]) -> str | None:
    """`a.b.c` as the ringleader module path it names, `a` resolved through the file's imports; None otherwise."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in modules:
        return None
    return ".".join([modules[node.id], *reversed(parts)])


def wrong_enum_paths(path: pathlib.Path, enums: set[str]) -> list[str]:
    """Where `path` takes one of variants' enums from another module: `from ringleader.api.spec import Paradigm`,
    `spec.Paradigm` after `from ringleader.api import spec`, `api.Architecture` after `from ringleader import api`."""
    tree = ast.parse(path.read_text())
    modules: dict[str, str] = {}
    wrong = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "ringleader":
                    modules[alias.asname or "ringleader"] = alias.name if alias.asname else "ringleader"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "ringleader":
            for alias in node.names:
                if alias.name in enums and node.module != VARIANTS:
                    wrong.append(f"line {node.lineno}: from {node.module} import {alias.name}")
                modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in enums:
            owner = _dotted(node.value, modules)
            if owner is not None and owner != VARIANTS:
                wrong.append(f"line {node.lineno}: {owner}.{node.attr}")
    return wrong


def test_the_variants_enums_are_taken_from_variants_alone():
    """One import path per enum: `ringleader.api.variants`, never a module that happens to hold the name."""
    enums = _variants_enums()
    assert {"Architecture", "Paradigm", "CompressionMethod", "Waits"} <= enums
    wrong = {}
    for folder in ("operator", "tests", "bench"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            found = wrong_enum_paths(path, enums)
            if found:
                wrong[str(path.relative_to(ROOT))] = found
    assert wrong == {}

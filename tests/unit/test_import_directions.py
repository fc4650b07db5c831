"""Packages depend one way, along the data's flow: spec -> contract -> rendering, ranks, tracking, analysis -> planning
-> operator, launcher -> the other commands' front ends.

Read from the source (every import, module-level or inside a function), so a new import against the
flow fails here before it makes a cycle.
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
    "analysis": {"api", "contract"},
    "tracking": {"api", "contract", "analysis"},
    "planning": {"api", "contract", "analysis"},
    "runtime": {"api", "contract", "analysis", "tracking"},
    "launch": {"api", "contract", "analysis", "tracking", "topology"},
    "commands": {"api", "contract", "analysis", "tracking", "planning", "launch"},
    "controller": {"api", "contract", "analysis", "tracking", "topology"},
}


def imported_packages(path: pathlib.Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
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

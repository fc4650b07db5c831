"""The dependency lock: fresh against pyproject.toml, one set of pins for the venv and the image, and
the environment the tests run in is exactly the lock (what `make venv` installs)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import pathlib
import re
import subprocess
import sys

from packaging.markers import Marker
from packaging.utils import canonicalize_name

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("lock", ROOT / "mk" / "lock.py")
lock = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lock)

PIN = re.compile(r"^([A-Za-z0-9._-]+)==([^ ;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$")


def pins(path: pathlib.Path) -> set[tuple[str, str, str | None]]:
    """(name, version, marker) of every requirement of a lock file; a name may have one pin per marker."""
    return {(canonicalize_name(match[1]), match[2], match[3])
            for match in map(PIN.match, path.read_text().splitlines()) if match}


def test_both_locks_are_fresh_against_pyproject():
    assert lock.stale() == []
    done = subprocess.run([sys.executable, str(ROOT / "mk" / "lock.py"), "check"], capture_output=True, text=True)
    assert (done.returncode, done.stderr) == (0, "")


def test_a_dependency_added_to_pyproject_makes_the_check_fail_naming_the_fix(tmp_path):
    edited = tmp_path / "pyproject.toml"
    edited.write_text((ROOT / "pyproject.toml").read_text().replace('"pyyaml>=6",', '"pyyaml>=6",\n    "rich",'))
    problems = lock.stale(pyproject=edited)
    assert [problem.split(":")[0] for problem in problems] == ["requirements.lock", "requirements-runtime.lock"]
    assert all("dependencies" in problem for problem in problems)


def test_an_edit_outside_the_dependency_tables_leaves_the_lock_fresh(tmp_path):
    edited = tmp_path / "pyproject.toml"
    edited.write_text((ROOT / "pyproject.toml").read_text().replace('timeout = 600', 'timeout = 601'))
    assert lock.stale(pyproject=edited) == []


def test_a_lock_without_its_header_is_refused_as_missing(tmp_path):
    headless = tmp_path / "requirements.lock"
    headless.write_text("six==1.17.0\n")
    [problem] = lock.stale(locks=(headless,))
    assert problem.startswith("requirements.lock: missing")


def test_the_image_lock_is_the_full_lock_less_the_test_tools_at_the_same_versions():
    everything, runtime = pins(ROOT / "requirements.lock"), pins(ROOT / "requirements-runtime.lock")
    assert len(runtime) > 100 and runtime < everything
    names = {name for name, _, _ in runtime}
    assert {"pytest", "playwright", "cel-python"} <= {name for name, _, _ in everything} - names
    assert {"torch", "mlflow", "kopf", "pyyaml", "setuptools"} <= names


def test_every_locked_requirement_carries_a_hash():
    for path in (ROOT / "requirements.lock", ROOT / "requirements-runtime.lock"):
        blocks = re.split(r"\n(?=[A-Za-z0-9])", path.read_text().split("\n", 3)[3])
        assert blocks and all("--hash=sha256:" in block for block in blocks if "==" in block)


def test_the_environment_the_tests_run_in_is_exactly_the_lock():
    """What `make venv` installs: every locked package for this platform at its pin, and nothing else."""
    expected = {name: version for name, version, marker in pins(ROOT / "requirements.lock")
                if marker is None or Marker(marker).evaluate()}
    installed = {canonicalize_name(dist.metadata["Name"]): dist.version
                 for dist in importlib.metadata.distributions()}
    installed.pop("ringleader", None)
    installed.pop("pip", None)  # the venv's own, from the Python that made it
    assert {name: installed.get(name) for name in expected if installed.get(name) != expected[name]} == {}, \
        "the environment is not the lock's: `make venv` installs it"
    assert sorted(installed.keys() - expected.keys()) == []

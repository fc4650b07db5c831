"""Each checkout runs its own code: two copies of the project side by side, each with a change of its own,
share the cached dependency environment (`make venv`, mk/venv.py) and neither re-points the other.

Real `make venv` in each copy, against the dependency environment this test session runs on (nothing is
downloaded); the copies hold what `make venv` reads, and the package with one line changed.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED_PTH = "_ringleader_shared_deps.pth"
MARK_TEST = '''import ringleader


def test_this_checkouts_package_is_imported():
    assert ringleader.CHECKOUT == {mark!r}
'''


def shared_deps() -> pathlib.Path:
    """The dependency environment of the .venv running this test (its .pth line names its site-packages)."""
    pth = pathlib.Path(sysconfig.get_paths()["purelib"]) / SHARED_PTH
    if not pth.is_file():
        pytest.fail(f"this interpreter ({sys.executable}) is not a checkout's .venv made by `make venv`: no {pth}")
    return pathlib.Path(pth.read_text().strip()).parents[2]  # <deps>/lib/python3.X/site-packages


def checkout(where: pathlib.Path, mark: str) -> pathlib.Path:
    """A copy of what `make venv` reads, with the package marked `mark` and a test that asserts the mark."""
    for name in ("Makefile", "pyproject.toml", "requirements.lock", "requirements-runtime.lock", "README.md"):
        shutil.copy2(ROOT / name, where / name)
    shutil.copytree(ROOT / "mk", where / "mk")
    shutil.copytree(ROOT / "operator", where / "operator",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    init = where / "operator" / "ringleader" / "__init__.py"
    init.write_text(init.read_text() + f"CHECKOUT = {mark!r}\n")
    (where / "tests").mkdir()
    (where / "tests" / "test_mark.py").write_text(MARK_TEST.format(mark=mark))
    return where


def make_venv(where: pathlib.Path, deps: pathlib.Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON", "MAKE", "MFLAGS"))}
    done = subprocess.run(["make", "--no-print-directory", "venv", f"DEPS={deps}"], cwd=where, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def imported_mark(where: pathlib.Path) -> str:
    done = subprocess.run([str(where / ".venv" / "bin" / "python"), "-c",
                           "import ringleader, pathlib; print(ringleader.CHECKOUT, pathlib.Path(ringleader.__file__))"],
                          capture_output=True, text=True, timeout=120, cwd="/")
    assert done.returncode == 0, done.stderr
    mark, path = done.stdout.split()
    assert pathlib.Path(path).is_relative_to(where), f"{where}'s .venv imports ringleader from {path}"
    return mark


@pytest.fixture(scope="module")
def two_checkouts(tmp_path_factory):
    deps = shared_deps()
    a = checkout(tmp_path_factory.mktemp("clone-a"), "a")
    b = checkout(tmp_path_factory.mktemp("clone-b"), "b")
    make_venv(a, deps)
    make_venv(b, deps)  # the second clone's `make venv` after the first's: it used to re-point the first
    return deps, a, b


def test_each_checkout_imports_its_own_package_after_the_other_made_its_environment(two_checkouts):
    _, a, b = two_checkouts
    assert imported_mark(a) == "a"
    assert imported_mark(b) == "b"


def test_each_checkouts_pytest_and_ringleader_command_run_its_own_code(two_checkouts):
    _, a, b = two_checkouts
    for where, mark in ((a, "a"), (b, "b")):
        done = subprocess.run([str(where / ".venv" / "bin" / "pytest"), "-q", "-p", "no:cacheprovider",
                               "tests/test_mark.py"], cwd=where, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{mark}: {done.stdout}{done.stderr}"
        command = (where / ".venv" / "bin" / "ringleader").read_text().splitlines()[0]
        assert command == f"#!{where / '.venv' / 'bin' / 'python'}", command
        version = subprocess.run([str(where / ".venv" / "bin" / "ringleader"), "version"],
                                 capture_output=True, text=True, timeout=120)
        assert version.returncode == 0 and "ringleader" in version.stdout, version.stdout + version.stderr


def test_the_shared_dependency_environment_holds_no_checkouts_package(two_checkouts):
    deps, _, _ = two_checkouts
    done = subprocess.run([str(deps / "bin" / "python"), "-c", "import ringleader"], capture_output=True,
                          text=True, timeout=120, cwd="/")
    assert done.returncode != 0 and "No module named 'ringleader'" in done.stderr, done.stderr


def test_a_venv_link_left_by_an_older_makefile_is_replaced_by_the_checkouts_own(two_checkouts, tmp_path):
    deps, _, _ = two_checkouts
    c = checkout(tmp_path, "c")
    (c / ".venv").symlink_to(deps)  # what `make venv` made before: a link to the shared environment
    make_venv(c, deps)
    assert not (c / ".venv").is_symlink() and imported_mark(c) == "c"

"""This checkout's Python environment, layered on the shared dependency environment: `make venv` runs it.

The dependencies (torch, mlflow: gigabytes) are installed once per lock into a shared environment that no
checkout writes into. Each checkout gets its own small `.venv` on the same interpreter:

  - a `.pth` line puts the shared environment's site-packages on its path, after its own;
  - this checkout's package is installed into it, editable, with its `ringleader` command;
  - every other command of the shared environment (mlflow, pytest, ruff, mypy, ...) gets a copy in
    `.venv/bin` whose interpreter line names `.venv/bin/python`, so it imports this checkout's code.

So a second clone, a branch's worktree or CI's clone never re-points another checkout's environment.

    python3 mk/venv.py --deps ~/.cache/ringleader/deps-<hash> --venv .venv
"""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PTH_NAME = "_ringleader_shared_deps.pth"
"""The file in the checkout's site-packages that names the shared one."""
OWN_COMMANDS = ("python", "pip", "activate", "Activate", "deactivate")
"""Commands of a venv itself, not of a package: the checkout's environment has its own (or none)."""


def site_packages(prefix: pathlib.Path) -> pathlib.Path:
    found = sorted(prefix.glob("lib/python3*/site-packages"))
    if len(found) != 1:
        raise SystemExit(f"mk/venv.py: expected one lib/python3*/site-packages under {prefix}, found {len(found)}")
    return found[0]


def repoint(script: pathlib.Path, interpreter: pathlib.Path, target: pathlib.Path) -> bool:
    """Copy a console script with its `#!` line naming `interpreter`; False for anything that is not one."""
    lines = script.read_bytes().split(b"\n", 1)
    if len(lines) < 2 or not lines[0].startswith(b"#!") or b"python" not in lines[0]:
        return False
    target.write_bytes(b"#!" + os.fsencode(interpreter) + b"\n" + lines[1])
    target.chmod(0o755)
    return True


def build(deps: pathlib.Path, venv: pathlib.Path) -> None:
    deps_python = deps / "bin" / "python"
    if not deps_python.exists():
        raise SystemExit(f"mk/venv.py: no dependency environment at {deps} (make venv creates it)")
    # The shared environment's interpreter makes the venv: the new one has the same base interpreter.
    subprocess.run([str(deps_python), "-m", "venv", "--clear", "--without-pip", str(venv)], check=True)
    (site_packages(venv) / PTH_NAME).write_text(f"{site_packages(deps)}\n")
    python = venv / "bin" / "python"
    # The shared environment's pip installs into this interpreter (`--python`); its build backend
    # (setuptools, pinned in the lock) is found through the .pth line, hence --no-build-isolation.
    subprocess.run([str(deps_python), "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    "--no-build-isolation", "--editable", str(ROOT)], check=True, stdout=subprocess.DEVNULL)
    for script in sorted((deps / "bin").iterdir()):
        target = venv / "bin" / script.name
        if script.name.startswith(OWN_COMMANDS) or target.exists() or not script.is_file():
            continue
        # A native command (ruff) runs no Python: a link does.
        if not repoint(script, python, target) and os.access(script, os.X_OK):
            target.symlink_to(script)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deps", type=pathlib.Path, required=True, help="the shared dependency environment")
    parser.add_argument("--venv", type=pathlib.Path, required=True, help="this checkout's environment to (re)make")
    args = parser.parse_args(argv)
    build(args.deps.resolve(), args.venv.absolute())
    return 0


if __name__ == "__main__":
    sys.exit(main())

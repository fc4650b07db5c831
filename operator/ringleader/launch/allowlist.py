"""Which of the launcher's environment variables a local rank sees: an allow-list, never the whole shell; used by
trials.py.

A rank runs the user's model factory, and what it prints goes to log files that are uploaded to
MLflow. The shell that runs `ringleader run` holds whatever its user exported (passwords, tokens,
cloud keys), so only these pass (docs/security.md):

- what a process needs to run as its user: SYSTEM below and the locale (LC_*);
- the rank's own tuning knobs (contract.KNOBS), as they are read by every rank;
- the variables the user names with `ringleader run --env NAME`.

The pod contract (contract/environment.py) is not taken from the shell: the launcher sets it for each
rank, and gives none an MLflow URI or run, since in a local run the launcher alone writes to MLflow
(sqlite allows no other writer). So no rank needs a tracking credential either.
"""

from __future__ import annotations

import re
from typing import Collection, Mapping

from ringleader.contract import environment as contract

SYSTEM = (
    "PATH", "HOME", "USER", "LOGNAME", "TMPDIR",  # find programs and files as the user does
    "LANG", "LANGUAGE", "TZ",  # read and print text and times as the user does (with LC_*)
    "PYTHONPATH",  # a factory's package, importable where the user's shell finds it (trials.py puts ringleader first)
    "LD_LIBRARY_PATH",  # the shared libraries the Python running the launcher was started with
    "CUDA_VISIBLE_DEVICES",  # the GPUs the user gave this run
)
LOCALE_PREFIX = "LC_"
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def allowed(name: str, passed: Collection[str] = ()) -> bool:
    """Whether a rank may see the launcher's variable `name`, given the names the user passed."""
    if name in contract.NAMES:
        return False
    return (name in SYSTEM or name.startswith(LOCALE_PREFIX) or name in contract.KNOBS
            or name in passed)


def selected(environ: Mapping[str, str], passed: Collection[str] = ()) -> dict[str, str]:
    """The part of `environ` a rank may see."""
    return {name: value for name, value in environ.items() if allowed(name, passed)}


def refusal(name: str) -> str | None:
    """Why `--env NAME` cannot be honoured (one line, with the fix), or None when it can."""
    if not NAME.fullmatch(name):
        return (f"--env {name!r} is not a variable name: export NAME=VALUE in the shell, then pass "
                "--env NAME (letters, digits and underscores)")
    if name in contract.NAMES:
        return (f"--env {name}: the launcher sets the pod contract's variables for each rank and gives ranks "
                f"no MLflow URI or run (it alone writes to MLflow); remove --env {name}")
    return None

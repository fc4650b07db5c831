"""The exit statuses of every `ringleader` command, one scheme for scripts and CI; cli.py and each delegate return them.

docs/cli.md lists them for people; argparse already exits with USAGE for what it refuses itself.
"""

OK = 0
"""Done as asked: every file valid, every trial finished, everything published."""
FAILED = 1
"""The input is wrong or unreadable (an experiment file, a run directory), or the work failed (a trial,
publishing, the operator): change the file, or look at what failed, and run the same command again."""
USAGE = 2
"""The command line must change: an unknown command or option, a missing argument, or an option value
that cannot work (`--trial` out of range, an `--output-dir` that cannot hold a run)."""


def signalled(signum: int) -> int:
    """Stopped by signal `signum`, as shells report it: 130 after Ctrl-C, 143 after SIGTERM."""
    return 128 + signum

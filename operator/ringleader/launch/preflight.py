"""What a local command checks before it starts anything: `Refused`, why it cannot go on, and `load_experiment`.

`ringleader run` (cli.py) and `ringleader profile` (commands/profile.py) both take an experiment file and refuse
what cannot run with one message and one exit status: `run` of each prints the one and returns the other.
Importing this module is cheap: the API's models are imported when a file is loaded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from ringleader.contract import exits

if TYPE_CHECKING:
    from ringleader.api import DistributedTrainingExperiment, Expansion


class Refused(Exception):
    """Why a command cannot go on, and the exit status (contract/exits.py) that says whether the file or an option
    is at fault."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def load_experiment(path: str, err: TextIO) -> tuple[str, DistributedTrainingExperiment, Expansion]:
    """(the file as messages name it, its experiment, its trials), checked as `ringleader validate` checks it: its
    problems refused (exit status 1), what it sets that no trial reads warned of on `err`."""
    from ringleader import api
    from ringleader.api import reading, rules

    name = reading.display_name(path)
    try:
        experiment = api.load(path)
        expansion = api.expand(experiment)
    except api.LoadError as error:
        raise Refused(error.shown(), exits.FAILED) from error
    except api.SpecError as error:
        raise Refused(str(error), exits.FAILED) from error
    for warning in rules.unread_fields(experiment.spec):
        print(f"{name}: warning: {warning}", file=err)
    return name, experiment, expansion

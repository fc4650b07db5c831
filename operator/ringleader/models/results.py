"""What a report is made of: a sweep's trials with their outcome, summary and records, wherever they were read.

tracking/ fills these from a `ringleader run` directory or from MLflow (the same files, uploaded as
artifacts); report/ turns them into tables, figures and findings. Nothing here reads a file or a
server, so a report is the same whichever source it came from.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Mapping

from ringleader.api.spec import ExperimentSpec
from ringleader.api.trial import Trial

if TYPE_CHECKING:  # summary.py imports profile.py (through cross_node), which imports this module
    from ringleader.models.summary import TrialSummary


@dataclasses.dataclass(frozen=True)
class TrialResult:
    """One trial as it ended (or stands): the resolved trial, its MLflow status and what it recorded."""

    trial: Trial
    status: str
    """status is the trial run's MLflow status: FINISHED, FAILED, KILLED or RUNNING."""
    message: str | None = None
    """message says why a trial did not finish."""
    summary: TrialSummary | None = None
    """summary is the trial's summary (summary.json as written by the rank), None if it has none."""
    records: Mapping[int, list[dict[str, Any]]] = dataclasses.field(default_factory=dict)
    """records maps each rank to its iteration records (contract/records.py), empty where none were read."""
    layers: Mapping[int, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    """layers maps each rank to its layers.json document (gradient-ready times, for the what-if model), where read."""

    @property
    def spec(self) -> ExperimentSpec:
        """The trial's spec, as it ran."""
        return self.trial.spec


@dataclasses.dataclass(frozen=True)
class SweepResult:
    """A sweep: one experiment's trials in expansion order."""

    experiment: str
    trials: list[TrialResult]
    planned: tuple[str, ...] = ()
    """planned names every trial the sweep meant to run, those without a result too; () when unknown."""
    provenance: str | None = None
    """provenance: on what machine, load, versions and command the sweep ran, in words (contract/provenance.py)."""
    mlflow_pages: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """mlflow_pages maps a trial ("quickstart-0") or rank ("quickstart-0/rank-1") to its run's page in the MLflow UI,
    where a tracking server's address is known (tracking/links.py); empty for a local store."""

    @property
    def axes(self) -> dict[str, list[str]]:
        """What the sweep varies: each swept axis (wire name, "repetition" included) with its values in
        first-seen order; an axis with one value is not varied and is left out."""
        values: dict[str, list[str]] = {}
        for result in self.trials:
            for axis, value in result.trial.parameters.items():
                seen = values.setdefault(axis, [])
                if value not in seen:
                    seen.append(value)
        return {axis: seen for axis, seen in values.items() if len(seen) > 1}

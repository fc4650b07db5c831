"""A report attached to its sweep run: the files under `report/`, the findings and tables as the run's description.

    attach(store, sweep_run_id, report.assembly.build(result, directory))

Used by `ringleader report`, the launcher's session end (sessions.py) and the operator. MLflow shows
the description (tag mlflow.note.content) on the run's page, findings first and the trials side by side
(report/comparison_figure.py) below them; it is cut to MLflow's tag limit by dropping table rows, never by
failing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ringleader.tracking import schema
from ringleader.tracking.store import Store

if TYPE_CHECKING:  # the type only: importing report.assembly loads matplotlib
    from ringleader.report.assembly import Report

ARTIFACT_DIR = "report"


def attach(store: Store, sweep_run_id: str, report: Report) -> None:
    """Log every file of `report` under report/ of the run and set the run's description; repeating it
    replaces both. Raises TrackingUnavailable when the store does not answer."""
    for path in report.files:
        store.log_artifact(sweep_run_id, path, ARTIFACT_DIR)
    where = f"artifact {ARTIFACT_DIR}/{report.html.name} of this run"
    shown = report.comparison
    # Relative, so it resolves under whatever address (and path prefix) the UI is served from.
    image = f"get-artifact?path={ARTIFACT_DIR}/{shown.path.name}&run_uuid={sweep_run_id}" if shown else None
    store.set_tags(sweep_run_id, {schema.TAG_NOTE: report.note(schema.MAX_TAG_VALUE, where, image)})

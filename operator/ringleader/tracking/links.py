"""Where a sweep's trials and ranks are in the MLflow UI, for the report's links: only with a tracking server.

A local store (a path, sqlite:, file:) has no address until someone serves it, on a port the report cannot know,
so its report links nothing; a server's (http(s)://...) UI is at the server's own address (schema.ui_base).
Both sources of a report link alike: a run directory finds its run ids in the cursors beside its records
(session_pages), a report read from MLflow in the runs it read (reading.from_mlflow).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ringleader.contract import layout
from ringleader.tracking import cursor as cursor_
from ringleader.tracking import schema
from ringleader.tracking.store import Store

TrialRuns = tuple[str, str, Mapping[int, str]]
"""TrialRuns is (trial name, its trial run's id, {rank: its rank run's id})."""


def session_pages(store: Store, session: layout.Session, sweep_run_id: str) -> dict[str, str]:
    """{"quickstart-0": its trial run's page, "quickstart-0/rank-1": that rank run's page, ...} for the session's
    trials and ranks published to `store`, in trial and rank order; {} for a local store."""
    base = schema.ui_base(store.uri)
    return {} if base is None else pages(base, store.experiment_of(sweep_run_id), session, store.uri)


def pages(base: str, experiment_id: str, session: layout.Session, tracking_uri: str) -> dict[str, str]:
    """session_pages under the UI at `base`, from the run ids the cursors of `tracking_uri` beside the records keep."""
    return run_pages(base, experiment_id, _published(session, tracking_uri))


def run_pages(base: str, experiment_id: str, trials: Iterable[TrialRuns]) -> dict[str, str]:
    """{trial name: its run's page, "<trial>/rank-<r>": its rank run's page} under the UI at `base`, in the order of
    `trials` and by rank."""
    found = {}
    for name, run_id, ranks in trials:
        found[name] = schema.ui_url(base, experiment_id, run_id)
        for rank, rank_run_id in sorted(ranks.items()):
            found[f"{name}/rank-{rank}"] = schema.ui_url(base, experiment_id, rank_run_id)
    return found


def _published(session: layout.Session, tracking_uri: str) -> Iterable[TrialRuns]:
    for name in session.trials:
        trial_dir = session.directory / name
        run_id = cursor_.Cursor.load(cursor_.path_for(trial_dir, tracking_uri)).run_id
        if run_id is None:
            continue
        ranks = {rank: cursor_.Cursor.load(cursor_.path_for(rank_dir, tracking_uri)).run_id
                 for rank, rank_dir in layout.rank_dirs(trial_dir).items()}
        yield name, run_id, {rank: rank_run_id for rank, rank_run_id in ranks.items() if rank_run_id is not None}

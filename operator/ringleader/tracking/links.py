"""Where a sweep's trials and ranks are in the MLflow UI, for the report's links: only with a tracking server.

A local store (a path, sqlite:, file:) has no address until someone serves it, on a port the report cannot know,
so its report links nothing; a server's (http(s)://...) UI is at the server's own address (schema.ui_base).
"""

from __future__ import annotations

from ringleader.contract import layout
from ringleader.tracking import cursor as cursor_
from ringleader.tracking import schema
from ringleader.tracking.store import Store


def session_pages(store: Store, session: layout.Session, sweep_run_id: str) -> dict[str, str]:
    """{"quickstart-0": its trial run's page, "quickstart-0/rank-1": that rank run's page, ...} for the session's
    trials and ranks published to `store`, in trial and rank order; {} for a local store."""
    base = schema.ui_base(store.uri)
    return {} if base is None else pages(base, store.experiment_of(sweep_run_id), session, store.uri)


def pages(base: str, experiment_id: str, session: layout.Session, tracking_uri: str) -> dict[str, str]:
    """session_pages under the UI at `base`, from the run ids the cursors of `tracking_uri` beside the records keep."""
    found = {}
    for name in session.trials:
        trial_dir = session.directory / name
        run_id = cursor_.Cursor.load(cursor_.path_for(trial_dir, tracking_uri)).run_id
        if run_id is None:
            continue
        found[name] = schema.ui_url(base, experiment_id, run_id)
        for rank, rank_dir in sorted(layout.rank_dirs(trial_dir).items()):
            rank_run_id = cursor_.Cursor.load(cursor_.path_for(rank_dir, tracking_uri)).run_id
            if rank_run_id is not None:
                found[f"{name}/rank-{rank}"] = schema.ui_url(base, experiment_id, rank_run_id)
    return found

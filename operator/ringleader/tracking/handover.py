"""Records a pod's rank could not publish, handed over through its log and published from there later: `block_of`
(runtime/ending.py, as the rank gives up waiting for MLflow) and `publish_log` (`ringleader publish --from-log`).

The block carries the rank's publish cursor, so publishing it sends only what MLflow lacks, into the rank run
the pod opened (or a new one, if it never could), and ends that run FINISHED; the trial summary goes to the
trial run when this rank wrote it. Each block is unpacked under a directory of the user's (kept, with its
cursors), so running the command again sends nothing twice.
"""

from __future__ import annotations

import dataclasses
import pathlib
import shutil
from typing import Iterable

from ringleader.api.trial import Trial
from ringleader.contract import environment as contract
from ringleader.contract import layout, redaction, unpublished
from ringleader.tracking import cursor as cursor_
from ringleader.tracking import live, schema
from ringleader.tracking.settings import TrackingSettings
from ringleader.tracking.store import Store

RANK_PREFIX, TRIAL_PREFIX = "rank/", "trial/"
TRIAL_OUTPUTS = (layout.SUMMARY_FILE, layout.SERIES_FILE)
REASON = "RecordsPublished"


def block_of(publisher: live.LivePublisher) -> tuple[str, list[str]]:
    """The handover block of a publisher's rank (its text, and what was left out to fit a log): its records
    directory, publish cursors included, the trial outputs it wrote, and where they belong."""
    env, trial = publisher.env, publisher.trial
    header = {
        "trial": trial.name, "rank": env.rank, "role": env.role, "attempt": env.attempt, "worldSize": env.world_size,
        "runId": publisher.run_id, "runToken": env.run_token,
        "mlflowExperiment": env.mlflow_experiment or trial.mlflow_experiment_name(),
        "trackingUri": publisher.shown_uri,
        "cursor": cursor_.path_for(publisher.rank_dir, env.tracking_uri or "").name,
    }
    files = {layout.TRIAL_FILE: trial.model_dump_json(by_alias=True).encode()}
    files.update({RANK_PREFIX + p.name: p.read_bytes() for p in _files(publisher.rank_dir.iterdir())})
    if publisher.writes_trial_outputs:
        files.update({TRIAL_PREFIX + p.name: p.read_bytes() for p in _files(publisher.rank_dir.parent.iterdir())
                      if p.name in TRIAL_OUTPUTS})
    return unpublished.block(header, files)


def _files(paths: Iterable[pathlib.Path]) -> list[pathlib.Path]:
    # Dot files are a cursor's temporary copies, mid-write.
    return sorted(p for p in paths if p.is_file() and not p.name.startswith("."))


@dataclasses.dataclass(frozen=True)
class Published:
    """What publishing one block did: the rank run it went into, or why it could not."""

    block: str
    run_id: str | None = None
    problem: str | None = None


def publish_log(lines: Iterable[str], work_dir: pathlib.Path, tracking_uri: str | None = None,
                settings: TrackingSettings | None = None) -> list[Published]:
    """Publish every handover block in a pod's log; BlockError (contract/unpublished.py) for a block that
    cannot be read back whole, before anything of it is sent."""
    return [_publish(block, work_dir, tracking_uri, settings or TrackingSettings())
            for block in list(unpublished.read_blocks(lines))]


def _publish(block: unpublished.Block, work_dir: pathlib.Path, tracking_uri: str | None,
             settings: TrackingSettings) -> Published:
    header = block.header
    uri = tracking_uri or str(header.get("trackingUri") or "")
    if not uri or redaction.is_redacted(uri):
        return Published(block.name, problem=f"the pod's tracking URI ({uri or 'none'}) cannot be used as it stands: "
                                              "give it with --tracking-uri")
    trial = Trial.model_validate_json(block.files[layout.TRIAL_FILE])
    rank, role = int(header["rank"]), str(header["role"])
    trial_dir = work_dir / layout.directory_name(trial.name)
    rank_dir = layout.rank_dir(trial_dir, rank)
    _unpack(block, trial_dir, rank_dir)
    _adopt_cursor(rank_dir, str(header.get("cursor") or ""), uri)
    env = contract.PodEnvironment(
        role=role, rank=rank, world_size=int(header["worldSize"]), master_addr="127.0.0.1",
        master_port=contract.DEFAULT_MASTER_PORT, trial_file=str(trial_dir / layout.TRIAL_FILE),
        output_dir=str(work_dir), run_id=header.get("runId") or None, tracking_uri=uri,
        run_token=header.get("runToken") or None, mlflow_experiment=header.get("mlflowExperiment") or None,
        attempt=int(header.get("attempt") or 1))
    if not env.publishes:
        return Published(block.name, problem="the block names neither the trial run nor its token")
    publisher = live.LivePublisher(env, trial, rank_dir, settings)
    if not publisher.stop(schema.FINISHED, timeout_seconds=settings.http_timeout_seconds * settings.attempts):
        return Published(block.name, problem=f"MLflow at {redaction.redact(uri)} did not take them; run it again "
                                              "later: what it took is not sent twice")
    run_id = cursor_.Cursor.load(cursor_.path_for(rank_dir, uri)).run_id
    if run_id:
        Store(uri, settings).set_tags(run_id, {
            schema.TAG_STATUS_REASON: REASON,
            schema.TAG_STATUS_MESSAGE: "the pod handed these records over in its log; `ringleader publish "
                                       "--from-log` published them after the trial ended"})
    return Published(block.name, run_id=run_id)


def _unpack(block: unpublished.Block, trial_dir: pathlib.Path, rank_dir: pathlib.Path) -> None:
    """The block's files in place; a cursor already there (an earlier publish of this block) is further along
    than the block's, and is kept."""
    rank_dir.mkdir(parents=True, exist_ok=True)
    for name, data in block.files.items():
        if name.startswith(RANK_PREFIX):
            path = rank_dir / name[len(RANK_PREFIX):]
        elif name.startswith(TRIAL_PREFIX):
            path = trial_dir / name[len(TRIAL_PREFIX):]
        else:
            path = trial_dir / name
        if path.name.startswith("mlflow-cursor-") and path.exists():
            continue
        path.write_bytes(data)


def _adopt_cursor(rank_dir: pathlib.Path, pod_cursor: str, uri: str) -> None:
    """The pod's cursor under the name of the URI publishing now (a port-forward's, say), unless that one exists:
    the same store reached another way must not get the records again."""
    source, target = rank_dir / pod_cursor, cursor_.path_for(rank_dir, uri)
    if pod_cursor and source.is_file() and not target.exists():
        shutil.copyfile(source, target)

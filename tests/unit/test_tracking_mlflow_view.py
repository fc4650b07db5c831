"""MLflow as the place to compare: trial runs tagged for the runs list's columns and the experiment's shared view of
them, phase series logged from their first non-zero value, the report linking each trial and rank to its MLflow page
only where a tracking server's address is known. Against a real sqlite store."""

from __future__ import annotations

import os

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import json

from ringleader.api import experiment
from ringleader.contract import layout, provenance
from ringleader.report import page
from ringleader.tracking import links, reading, replay, schema

import test_tracking_publisher as published
from test_tracking_publisher import append_records, history, make_trials, rank_publisher, write_trial

# The publisher tests' fixtures: a copy of a migrated sqlite store per test, a trial run in it.
template_db, store, trial_run = published.template_db, published.store, published.trial_run


TAKEN = provenance.ended(provenance.at_start(["ringleader", "run", "tiny.yaml"], None))


def publish_session(store, tmp_path) -> tuple[layout.Session, str, str]:
    trials = make_trials(("ParameterServer", "RingAllReduce"))
    session = layout.Session(tmp_path / "tiny-session", experiment.parse({
        "apiVersion": "ringleader.dev/v1alpha1", "kind": "DistributedTrainingExperiment", "metadata": {"name": "tiny"},
        "spec": {"sweep": {"matrix": {"architecture": ["ParameterServer", "RingAllReduce"]}}}}),
        store.uri, [t.name for t in trials], provenance=TAKEN)
    session.directory.mkdir()
    session.save()
    for the_trial in trials:
        write_trial(session.directory, the_trial)
    layout.write_outcome(session.directory, layout.Outcome("FINISHED", 1_700_000_000.0, 1_700_000_100.0))
    result = replay.publish_dir(session.directory).sessions[0]
    return session, result.experiment_id, result.parent_run_id


def test_trial_runs_carry_architecture_paradigm_and_workers_and_the_experiments_view_lists_them_with_throughput(
        store, tmp_path):
    _, experiment_id, _ = publish_session(store, tmp_path)

    view = json.loads(store.client.get_experiment(experiment_id).tags[schema.TAG_SHARED_VIEW + schema.TRIALS_VIEW])
    listed = store.client.search_runs([experiment_id], filter_string=view["searchFilter"])
    assert sorted(r.data.tags[schema.TAG_ARCHITECTURE] for r in listed) == ["1ps", "ring"]
    assert {(r.data.tags[schema.TAG_PARADIGM], r.data.tags[schema.TAG_WORKERS]) for r in listed} == {("BSP", "2")}
    # Every column the view selects holds a value on every trial run: no empty column.
    for run in listed:
        values = {"tags": run.data.tags, "metrics": run.data.metrics}
        for column in view["selectedColumns"]:
            kind, key = column.split(".", 1)
            assert key.strip("`") in values[kind], (column, run.data.tags[schema.TAG_TRIAL])
    assert "throughput_samples_per_s" in {c.split(".", 1)[1].strip("`") for c in view["selectedColumns"]}
    assert schema.trials_url("http://127.0.0.1:5000", experiment_id) == (
        f"http://127.0.0.1:5000/#/experiments/{experiment_id}/runs?viewStateShareKey={schema.TRIALS_VIEW}"
        "&workflowType=machine_learning")


def test_a_phase_zero_throughout_is_not_logged_and_one_used_later_starts_at_its_first_non_zero_value(
        store, trial_run, tmp_path):
    experiment_id, trial_run_id = trial_run
    rank_dir = tmp_path / "rank-0"
    append_records(rank_dir, range(20))
    lines = [json.loads(line) for line in (rank_dir / layout.ITERATIONS_FILE).read_text().splitlines()]
    for record in lines:
        record["time/wait"] = 0.0  # never waits (a ring under BSP)
        record["time/codec"] = 0.002 if 6 <= record["step"] < 15 else 0.0  # encodes from step 6, not after 15
    (rank_dir / layout.ITERATIONS_FILE).write_text("".join(json.dumps(r) + "\n" for r in lines[:10]))
    first = rank_publisher(store, rank_dir, experiment_id, trial_run_id)
    first.publish()  # steps 0-9, then 10-19 in a second round: what was used is remembered between rounds
    with open(rank_dir / layout.ITERATIONS_FILE, "a") as handle:
        handle.write("".join(json.dumps(r) + "\n" for r in lines[10:]))
    rank_publisher(store, rank_dir, experiment_id, trial_run_id).publish()

    run_id = store.client.search_runs(
        [experiment_id], f"tags.`{schema.TAG_KIND}` = 'rank'")[0].info.run_id
    assert history(store, run_id, "time/wait_ms") == []
    codec = history(store, run_id, "time/codec_ms")
    assert [step for step, _ in codec] == list(range(6, 20))
    assert codec[0][1] == 2.0 and codec[-1][1] == 0.0  # its zeros after first use are drawn
    assert [step for step, _ in history(store, run_id, "time/comm_ms")] == list(range(20))


def test_the_report_links_trials_and_ranks_to_their_pages_only_when_a_tracking_server_is_known(store, tmp_path):
    session, experiment_id, sweep_run_id = publish_session(store, tmp_path)

    # A local store: its UI has no address, so the report (built as the session ended) links nothing.
    assert links.session_pages(store, session, sweep_run_id) == {}
    assert "In MLflow" not in (session.directory / "report" / "report.html").read_text()

    # A tracking server: every trial and rank whose run the cursors know, at the server's own address.
    pages = links.pages("https://mlflow.example:8443/ml", experiment_id, session, store.uri)
    trials = [name for name in pages if "/" not in name]
    assert trials == session.trials
    ranks = [name for name in pages if "/" in name]
    assert ranks == ["tiny-0/rank-1", "tiny-0/rank-2", "tiny-1/rank-0", "tiny-1/rank-1"]
    trial_run = store.client.search_runs([experiment_id], f"tags.`{schema.TAG_TRIAL}` = 'tiny-0' and "
                                                          f"tags.`{schema.TAG_KIND}` = 'trial'")[0]
    assert pages["tiny-0"] == (f"https://mlflow.example:8443/ml/#/experiments/{experiment_id}/runs/"
                               f"{trial_run.info.run_id}?workflowType=machine_learning")
    html = page.render("tiny", [], [], [], "footer", None, pages)
    assert f'<a href="{pages["tiny-0/rank-1"].replace("&", "&amp;")}">tiny-0/rank-1</a>' in html


def test_a_report_read_back_from_mlflow_states_where_its_numbers_were_taken_and_links_like_its_run_directory(
        store, tmp_path):
    session, experiment_id, sweep_run_id = publish_session(store, tmp_path)

    result, run_id = reading.from_mlflow(store, sweep_run_id)
    assert run_id == sweep_run_id and [t.trial.name for t in result.trials] == session.trials
    # The sweep run's provenance tags read back into the line the run directory's report shows.
    assert result.provenance == reading.from_directory(session.directory).provenance
    assert result.provenance == provenance.words(TAKEN) and "`ringleader run tiny.yaml`" in result.provenance
    # A local store: no address, no links.
    assert result.mlflow_pages == {}
    # Under a server's address, the runs read from MLflow give the pages the cursors beside the records give.
    trial_runs = store.client.search_runs([experiment_id], f"tags.`{schema.TAG_KIND}` = 'trial'")
    read = []
    for trial_run in sorted(trial_runs, key=lambda r: int(r.data.tags[schema.TAG_TRIAL_INDEX])):
        ranks = store.client.search_runs([experiment_id],
                                         f"tags.`{schema.TAG_PARENT_RUN_ID}` = '{trial_run.info.run_id}'")
        read.append((trial_run.data.tags[schema.TAG_TRIAL], trial_run.info.run_id,
                     {int(r.data.tags[schema.TAG_RANK]): r.info.run_id for r in ranks}))
    base = "https://mlflow.example:8443/ml"
    assert links.run_pages(base, experiment_id, read) == links.pages(base, experiment_id, session, store.uri)


def test_a_tracking_servers_ui_address_keeps_no_credentials_and_a_local_store_has_none():
    assert schema.ui_base("https://user:secret@mlflow.example:8443/ml/?token=x") == "https://mlflow.example:8443/ml"
    assert schema.ui_base("http://[::1]:5000") == "http://[::1]:5000"
    for local in ("sqlite:///mlflow.db", "file:///tmp/mlruns", "/tmp/mlruns", "mlruns", None):
        assert schema.ui_base(local) is None


def test_the_sweep_run_opens_on_its_findings_then_one_figure_with_every_trial_on_one_axis_per_measure(store, tmp_path):
    _, experiment_id, sweep_run_id = publish_session(store, tmp_path)

    sweep = store.client.get_run(sweep_run_id)
    assert "report/comparison.png" in {a.path for a in store.client.list_artifacts(sweep_run_id, "report")}
    note = sweep.data.tags[schema.TAG_NOTE]
    findings, _, rest = note.partition("\n\n")
    assert findings.startswith("- ") and "tiny-0" in findings  # the answer first, no heading above it
    assert rest.startswith("![The trials side by "
                           f"side](get-artifact?path=report/comparison.png&run_uuid={sweep_run_id})")
    report = json.loads((tmp_path / "tiny-session" / "report" / "report.json").read_text())
    assert report["figures"][0]["id"] == "comparison"

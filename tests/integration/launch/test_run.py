"""`ringleader run`: a sweep as local processes into ./mlflow.db; a crashed rank fails only its trial."""

from __future__ import annotations

import json
import re
import socket

import mlflow.tracking
import pytest

import launching

pytestmark = pytest.mark.integration


def runs_of(workdir, experiment_name: str):
    client = mlflow.tracking.MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    experiment = client.get_experiment_by_name(experiment_name)
    assert experiment is not None, f"no MLflow experiment {experiment_name}"
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    by_kind = {}
    for run in runs:
        by_kind.setdefault(run.data.tags.get("ringleader.kind"), []).append(run)
    return client, by_kind


def test_a_sweep_over_two_architectures_records_runs_nested_ranks_metrics_and_artifacts(workdir):
    path = launching.experiment_file(workdir, "arch", {
        "sweep": {"matrix": {"architecture": ["ParameterServer", "RingAllReduce"]}}})

    finished = launching.run(workdir, str(path))

    assert finished.returncode == 0, finished.output
    # The table's header line, not a progress line that says "trial" (a slow machine prints some first).
    table = finished.output[re.search(r"(?m)^trial\s", finished.output).start():]
    assert [line.split()[:3] for line in table.splitlines()[2:4]] == [
        ["arch-0", "ParameterServer", "BSP"], ["arch-1", "RingAllReduce", "BSP"]]
    assert all(line.split()[-1] == "FINISHED" for line in table.splitlines()[2:4])
    assert "ringleader ui --tracking-uri sqlite:///mlflow.db" in finished.output
    # It ends on the answer, the report's findings in their order: who is faster (or that it is not settled, once),
    # then where the time goes.
    answer = finished.output[finished.output.rindex("\nThe answer:\n") + 1:].splitlines()
    assert answer[1].startswith(("- Fastest: ", "- No clear fastest: ", "- RingAllReduce: "))
    assert sum(line.startswith("- No clear fastest") for line in answer) <= 1
    assert any(line.startswith("- Communication is ") for line in answer), answer
    said = [line for line in answer[1:] if line.startswith("- ")]
    reported = json.loads(next((workdir / "ringleader-runs").glob("arch-*/report/report.json")).read_text())["findings"]
    assert said == [f"- {finding}" for finding in reported[:len(said)]]

    client, runs = runs_of(workdir, "default/arch")
    [sweep] = runs["sweep"]
    assert sweep.info.status == "FINISHED"
    assert ({"report/report.html", "report/report.csv"}
            <= {a.path for a in client.list_artifacts(sweep.info.run_id, "report")})
    trials = {run.data.tags["ringleader.trial"]: run for run in runs["trial"]}
    assert sorted(trials) == ["arch-0", "arch-1"]
    for name, run in trials.items():
        assert run.info.status == "FINISHED"
        assert run.data.tags["mlflow.parentRunId"] == sweep.info.run_id
        assert run.data.params["workers.replicas"] == "2" and run.data.params["trial.name"] == name
        assert run.data.metrics["throughput_samples_per_s"] > 0
        assert 0 < run.data.metrics["iteration_p50_ms"] <= run.data.metrics["iteration_p95_ms"]
        artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
        assert {"trial.json", "topology.yaml", "breakdown.png", "traces", "logs"} <= artifacts
    assert trials["arch-0"].data.params["architecture"] == "ParameterServer"

    ranks = runs["rank"]
    assert sorted((r.data.tags["ringleader.trial"], r.data.tags["ringleader.rank"], r.data.tags["ringleader.role"])
                  for r in ranks) == [("arch-0", "0", "ps"), ("arch-0", "1", "worker"), ("arch-0", "2", "worker"),
                                      ("arch-1", "0", "worker"), ("arch-1", "1", "worker")]
    for rank in ranks:
        trial_run = trials[rank.data.tags["ringleader.trial"]]
        assert rank.data.tags["mlflow.parentRunId"] == trial_run.info.run_id
        assert rank.info.status == "FINISHED"
        if rank.data.tags["ringleader.role"] == "worker":
            history = client.get_metric_history(rank.info.run_id, "time/iteration_ms")
            warmup = client.get_metric_history(rank.info.run_id, "warmup/time/iteration_ms")
            assert sorted(m.step for m in warmup + history) == list(range(20))  # every iteration, once

    # Every rank's records are on disk too, published (the cursors reached the end of each file).
    [session] = [d for d in (workdir / "ringleader-runs").iterdir() if d.is_dir()]
    [cursor_file] = (session / "arch-1" / "rank-0").glob("mlflow-cursor-*.json")  # one store, one cursor
    cursor = json.loads(cursor_file.read_text())
    assert cursor["records"] == 20


def test_a_crashed_rank_fails_its_trial_with_the_rank_and_reason_and_the_next_trial_still_runs(workdir):
    path = launching.experiment_file(workdir, "crash", {
        "architecture": "RingAllReduce", "model": {"name": "crashing_models:factory"},
        "sweep": {"matrix": {"batchSize": [16, 8]}}})

    finished = launching.run(workdir, str(path), "--env", "RINGLEADER_TEST_CRASH",
                             extra_env={"RINGLEADER_TEST_CRASH": "0:1:5"})

    assert finished.returncode == 1, finished.output
    assert "crash-0 (RingAllReduce, BSP, 2 workers, batch 16): FAILED" in finished.output
    assert "rank 1 (worker-1) exited with code 3" in finished.output
    # The table's header line, not a progress line that says "trial" (a slow machine prints some first).
    table = finished.output[re.search(r"(?m)^trial\s", finished.output).start():].splitlines()
    assert table[2].split()[0] == "crash-0" and table[2].split()[-1] == "FAILED"
    assert table[3].split()[0] == "crash-1" and table[3].split()[-1] == "FINISHED"

    client, runs = runs_of(workdir, "default/crash")
    trials = {run.data.tags["ringleader.trial"]: run for run in runs["trial"]}
    assert trials["crash-0"].info.status == "FAILED"
    assert trials["crash-0"].data.tags["ringleader.reason"] == "RankFailed"
    assert "rank 1 (worker-1) exited with code 3" in trials["crash-0"].data.tags["ringleader.message"]
    assert trials["crash-1"].info.status == "FINISHED"
    statuses = {(r.data.tags["ringleader.trial"], r.data.tags["ringleader.rank"]): r.info.status for r in runs["rank"]}
    assert statuses == {("crash-0", "0"): "KILLED", ("crash-0", "1"): "FAILED",
                        ("crash-1", "0"): "FINISHED", ("crash-1", "1"): "FINISHED"}
    [sweep] = runs["sweep"]
    assert sweep.info.status == "FAILED"
    # What the crashed rank did before it died is kept: its first 5 iterations.
    crashed = next(r for r in runs["rank"] if r.data.tags["ringleader.trial"] == "crash-0"
                   and r.data.tags["ringleader.rank"] == "1")
    steps = [m.step for key in ("time/iteration_ms", "warmup/time/iteration_ms")
             for m in client.get_metric_history(crashed.info.run_id, key)]
    assert sorted(steps) == list(range(5))


def test_a_first_run_into_a_new_store_prints_only_ringleaders_own_lines(workdir):
    (workdir / "mlflow.db").unlink()  # MLflow creates and migrates it during this run
    path = launching.experiment_file(workdir, "quiet", {"architecture": "RingAllReduce"})

    finished = launching.run(workdir, str(path))

    assert finished.returncode == 0, finished.output
    assert (workdir / "mlflow.db").stat().st_size > 0
    chatter = [line for line in finished.output.splitlines()
               if " INFO " in line or "Warning" in line or "alembic" in line or "deprecat" in line.lower()]
    assert chatter == []


def test_a_gpu_ring_without_a_gpu_per_rank_is_refused_before_anything_starts(workdir):
    path = launching.experiment_file(workdir, "nccl", {"architecture": "RingAllReduce",
                                                       "workers": {"replicas": 2, "resources": {"gpu": 1}}})

    finished = launching.run(workdir, str(path), extra_env={"CUDA_VISIBLE_DEVICES": ""})  # no GPU for this run

    assert finished.returncode == 1
    assert f"{path}: trial nccl-0 runs the ring on NCCL, which needs a GPU of its own per rank: it asks for 2 GPUs " \
           "and 0 are visible here. Set `workers.resources.gpu: 0` to run the ring on gloo on the CPU" \
           in finished.output
    assert not (workdir / "ringleader-runs").exists()


def test_placement_does_not_apply_locally_and_says_so_once_while_every_rank_records_this_machine(workdir):
    path = launching.experiment_file(workdir, "placed", {
        "sweep": {"matrix": {"placement": [{"ranks": "Spread"}, {"ranks": "Pack", "servers": "Apart"}]}}})

    finished = launching.run(workdir, str(path))

    assert finished.returncode == 0, finished.output
    assert finished.output.count("does not apply to `ringleader run`") == 1
    assert "(Pack, servers Apart, Spread)" in finished.output
    _, runs = runs_of(workdir, "default/placed")
    node = socket.gethostname()
    assert {r.data.tags.get("ringleader.node") for r in runs["rank"]} == {node} and len(runs["rank"]) == 6
    for trial in runs["trial"]:
        assert trial.data.tags["ringleader.placement"] == "1 node, 0% across"
        assert trial.data.metrics["placement_nodes"] == 1 and trial.data.metrics["placement_cross_node_bytes_pct"] == 0
    assert sorted(t.data.params["trial.parameters.placement"] for t in runs["trial"]) == [
        "Pack, servers Apart", "Spread"]


def test_ranks_per_pod_run_locally_one_process_each_with_torchruns_environment_and_name_their_pod(workdir):
    path = launching.experiment_file(workdir, "pairs", {
        "architecture": "RingAllReduce", "workers": {"replicas": 4, "ranksPerPod": 2, "resources": {"cpu": "2"}}})

    finished = launching.run(workdir, str(path))

    assert finished.returncode == 0, finished.output
    _, runs = runs_of(workdir, "default/pairs")
    ranks = {int(r.data.tags["ringleader.rank"]): r.data.tags for r in runs["rank"]}
    assert {rank: (tags["ringleader.pod"], tags["ringleader.localRank"]) for rank, tags in ranks.items()} == {
        0: ("worker-0", "0"), 1: ("worker-0", "1"), 2: ("worker-1", "0"), 3: ("worker-1", "1")}
    assert {tags["ringleader.node"] for tags in ranks.values()} == {socket.gethostname()}
    [trial_dir] = (workdir / "ringleader-runs").glob("pairs-*/pairs-0")
    usage = json.loads((trial_dir / "summary.json").read_text())["usage"]
    assert {used["threads"] for used in usage.values()} == {1}  # 2 CPUs a pod, split between its 2 ranks

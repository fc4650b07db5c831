"""`ringleader run` with user code that pries or misbehaves: ranks see an allow-listed environment, never
the shell's secrets, and a factory that exits or raises, or a worker that records nothing, fails its trial."""

from __future__ import annotations

import json
import pathlib

import pytest

import launching
import untrusted_models
from test_run import runs_of

pytestmark = pytest.mark.integration

SECRETS = {"MLFLOW_TRACKING_PASSWORD": "hunter2-tracking-password", "MLFLOW_TRACKING_TOKEN": "tracking-token-4711",
           "AWS_SECRET_ACCESS_KEY": "aws-secret-0815", "SECRET_X": "secret-x-value"}
# What a rank may see of the launcher's environment, besides what the run names (docs/security.md), and
# PYTHONUNBUFFERED, which the launcher sets for its ranks itself.
ALLOWED = {"PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "LANG", "LANGUAGE", "TZ", "PYTHONPATH", "LD_LIBRARY_PATH",
           "CUDA_VISIBLE_DEVICES", "RINGLEADER_TIMEOUT_SECONDS", "PYTHONUNBUFFERED"}


def every_file_containing(directory: pathlib.Path, text: str) -> list[str]:
    return [str(path.relative_to(directory)) for path in directory.rglob("*")
            if path.is_file() and text.encode() in path.read_bytes()]


def test_ranks_never_see_the_shells_secrets_but_do_see_the_variables_the_run_names(workdir):
    path = launching.experiment_file(workdir, "environ", {"model": {"name": "untrusted_models:prints_environment"}})
    shell = {**SECRETS, "DATASET_ROOT": "/data/named-and-passed", "LC_TIME": "C"}

    finished = launching.run(workdir, str(path), "--env", "DATASET_ROOT", extra_env=shell)

    assert finished.returncode == 0, finished.output
    [session] = [d for d in (workdir / "ringleader-runs").iterdir() if d.is_dir()]
    for rank in (0, 1):
        stdout = (session / "environ-0" / "logs" / f"rank-{rank}.stdout").read_text()
        [line] = [line for line in stdout.splitlines() if line.startswith(untrusted_models.ENVIRONMENT_PREFIX)]
        seen = json.loads(line[len(untrusted_models.ENVIRONMENT_PREFIX):])
        assert seen["DATASET_ROOT"] == "/data/named-and-passed" and seen["LC_TIME"] == "C"
        assert seen["RANK"] == str(rank) and seen["RINGLEADER_TIMEOUT_SECONDS"] == "30"
        # Of the launcher's own variables, only the allow-listed and the named ones got through.
        launcher = launching.launcher_environ(shell)
        leaked = {name for name, value in seen.items() if launcher.get(name) == value
                  and name not in ALLOWED | {"DATASET_ROOT"} and not name.startswith("LC_")}
        assert leaked == set()
    # Nowhere: not in the logs, the records, the MLflow database or its artifacts (logs are uploaded).
    for name, value in SECRETS.items():
        assert every_file_containing(workdir, value) == [], name
    _, runs = runs_of(workdir, "default/environ")
    assert [run.info.status for run in runs["trial"]] == ["FINISHED"]


def test_ringleader_run_refuses_to_pass_a_variable_of_the_pod_contract(workdir):
    path = launching.experiment_file(workdir, "refused", {})

    finished = launching.run(workdir, str(path), "--env", "MLFLOW_TRACKING_URI", timeout=60)

    assert finished.returncode == 2
    assert finished.output.startswith("--env MLFLOW_TRACKING_URI: the launcher sets the pod contract's variables")
    assert len(finished.output.splitlines()) == 1, finished.output


def test_a_factory_that_exits_or_raises_or_a_rank_that_ends_early_fails_its_trial_saying_why(workdir):
    path = launching.experiment_file(workdir, "rogue", {
        "architecture": "RingAllReduce", "model": {"name": "untrusted_models:misbehaving"},
        "sweep": {"matrix": {"batchSize": [16, 8, 4, 2]}}})

    finished = launching.run(workdir, str(path), timeout=200)

    assert finished.returncode == 1, finished.output
    _, runs = runs_of(workdir, "default/rogue")
    trials = {run.data.tags["ringleader.trial"]: run for run in runs["trial"]}
    assert {name: run.info.status for name, run in trials.items()} == {
        "rogue-0": "FAILED", "rogue-1": "FAILED", "rogue-2": "FAILED", "rogue-3": "FAILED"}
    message = {name: run.data.tags["ringleader.message"] for name, run in trials.items()}
    reason = {name: run.data.tags["ringleader.reason"] for name, run in trials.items()}
    assert ("exited with code 1: ModelError: model 'untrusted_models:misbehaving': misbehaving() called sys.exit(0)"
            in message["rogue-0"]), message["rogue-0"]
    assert ("exited with code 1: ModelError: model 'untrusted_models:misbehaving': misbehaving() raised "
            "RuntimeError: no weights in this checkpoint" in message["rogue-1"]), message["rogue-1"]
    # os._exit(0): nothing in the rank can see it; the launcher does, from the records.
    assert reason["rogue-2"] == "ExitedEarly", message["rogue-2"]
    assert message["rogue-2"] == "rank 0 (worker-0) exited with code 0 but recorded no iteration"
    assert ("rank 1 (worker-1) exited with code 1: user code called sys.exit(0) before the rank finished"
            in message["rogue-3"]), message["rogue-3"]
    # A ModelError is permanent, as the operator says it too; sys.exit(0) in user code is not.
    assert (reason["rogue-0"], reason["rogue-1"], reason["rogue-3"]) == ("PermanentFailure", "PermanentFailure",
                                                                          "RankFailed")
    assert "Traceback" not in finished.output

"""A rank started wrongly exits at once with one line saying what to fix."""

import pathlib
import subprocess
import sys

import pytest

REPOSITORY = pathlib.Path(__file__).resolve().parents[3]
SOURCE_ROOT = REPOSITORY / "operator"

pytestmark = pytest.mark.integration


def start_rank(env: dict, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ringleader.runtime"], cwd=REPOSITORY, capture_output=True,
                          text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(SOURCE_ROOT), **env})


def test_a_missing_variable_is_named(tmp_path):
    done = start_rank({"RINGLEADER_ROLE": "worker"}, tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "ringleader: rank failed (permanent): environment variable RANK is not set: "
        "ringleader pods and `ringleader run` "
        "set it; set it when starting a rank by hand")


def test_a_rank_that_does_not_match_the_trial_is_refused(tmp_path, make_trial):
    trial_file = tmp_path / "trial.json"
    trial_file.write_text(make_trial().model_dump_json(by_alias=True))
    env = {"RINGLEADER_ROLE": "ps", "RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1",
           "RINGLEADER_TRIAL_FILE": str(trial_file), "RINGLEADER_OUTPUT_DIR": str(tmp_path)}
    done = start_rank(env, tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "ringleader: rank 0 (ps) failed (permanent): RINGLEADER_ROLE=ps but rank 0 of trial test-0 is a worker")


def test_a_model_that_cannot_be_imported_fails_every_rank_saying_no_restart_can_fix_it(make_trial, run_trial):
    run = run_trial(make_trial({"model": {"name": "nosuch_package.nets:tiny"}}), timeout=60)
    assert set(run.returncodes.values()) == {1}, run.explain()
    for rank in run.returncodes:
        last = run.stderr(rank).strip().splitlines()[-1]
        assert last.startswith(f"ringleader: rank {rank} (worker) failed (permanent): ModelError: model "
                               "'nosuch_package.nets:tiny': importing nosuch_package.nets failed: cannot import "
                               "'nosuch_package'"), last
        assert last.endswith("install it in the image or put it on PYTHONPATH"), last

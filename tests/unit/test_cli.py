"""The `ringleader` command: validate explains, render prints objects, crd prints the CRD, run/operator delegate."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest
import yaml

from ringleader import cli
from ringleader.api import crd

VALID = """\
apiVersion: ringleader.dev/v1alpha1
kind: DistributedTrainingExperiment
metadata: {name: sweep}
spec:
  sync: {staleness: 2}
  workers: {replicas: 2}
  sweep:
    matrix:
      architecture: [PeerToPeer, RingAllReduce]
      paradigm: [BSP, SSP]
"""
INVALID = """\
apiVersion: ringleader.dev/v1alpha1
kind: DistributedTrainingExperiment
metadata: {name: broken}
spec:
  sync: {paradigm: DSSP, staleness: 5, maxStaleness: 3}
  workers: {replicas: 0}
  modle: {name: mlp}
"""


@pytest.fixture
def files(tmp_path):
    (tmp_path / "valid.yaml").write_text(VALID)
    (tmp_path / "invalid.yaml").write_text(INVALID)
    return tmp_path


def run(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_validate_lists_trials_and_skipped_combinations(files, capsys):
    code, out, _ = run(capsys, "validate", str(files / "valid.yaml"))
    assert code == 0
    assert out.splitlines() == [
        f"{files / 'valid.yaml'}: valid, 3 trials",
        "  sweep-0: PeerToPeer BSP, 2 pods (architecture=PeerToPeer, paradigm=BSP)",
        "  sweep-1: PeerToPeer SSP, 2 pods (architecture=PeerToPeer, paradigm=SSP)",
        "  sweep-2: RingAllReduce BSP, 2 pods (architecture=RingAllReduce, paradigm=BSP)",
        "  skipped (architecture=RingAllReduce, paradigm=SSP): RingAllReduce runs BSP only, not SSP",
    ]


def test_validate_prints_every_problem_with_its_field_and_fix_on_stderr(files, capsys):
    code, out, err = run(capsys, "validate", str(files / "invalid.yaml"))
    assert (code, out) == (1, "")
    lines = err.splitlines()
    assert lines[0] == f"{files / 'invalid.yaml'}: invalid"
    assert "  - `spec.workers.replicas` must be greater than or equal to 1 (got 0)" in lines
    assert "  - `spec.modle` is not a field of this object: check its spelling (fields are camelCase)" in lines
    assert "  - spec.sync.maxStaleness: `sync.maxStaleness` must be greater than `sync.staleness`: DSSP moves " \
           "its threshold between the two; raise maxStaleness or lower staleness" in lines
    assert len(lines) == 4


def test_validate_fails_when_any_file_is_invalid(files, capsys):
    code, out, err = run(capsys, "validate", str(files / "valid.yaml"), str(files / "invalid.yaml"),
                         str(files / "absent.yaml"))
    assert code == 1
    assert out.startswith(f"{files / 'valid.yaml'}: valid, 3 trials\n") and "invalid" not in out
    assert err.startswith(f"{files / 'invalid.yaml'}: invalid\n")
    assert err.endswith(f"{files / 'absent.yaml'}: file not found\n")


def test_render_prints_every_trials_objects_as_one_stream(files, capsys):
    code, out, _ = run(capsys, "render", str(files / "valid.yaml"), "--image", "train:1", "--run-id", "r1")
    assert code == 0
    objects = list(yaml.safe_load_all(out))
    assert [o["kind"] for o in objects] == ["Service", "ConfigMap", "Pod", "Pod"] * 3
    assert {o["metadata"]["labels"]["ringleader.dev/trial"] for o in objects} == {"sweep-0", "sweep-1", "sweep-2"}
    pods = [o for o in objects if o["kind"] == "Pod"]
    assert {p["spec"]["containers"][0]["image"] for p in pods} == {"train:1"}
    assert "&id" not in out  # no YAML anchors for people to decode


def test_render_one_trial(files, capsys):
    code, out, _ = run(capsys, "render", str(files / "valid.yaml"), "--trial", "2", "--tracking-uri", "http://m:5000")
    assert code == 0
    objects = list(yaml.safe_load_all(out))
    assert {o["metadata"]["labels"]["ringleader.dev/trial"] for o in objects} == {"sweep-2"}
    env = {e["name"]: e["value"] for e in objects[2]["spec"]["containers"][0]["env"]}
    assert env["MLFLOW_TRACKING_URI"] == "http://m:5000"


def test_render_refuses_a_trial_that_does_not_exist_as_a_usage_error(files, capsys):
    code, out, err = run(capsys, "render", str(files / "valid.yaml"), "--trial", "3")
    assert (code, out) == (2, "")
    assert "--trial 3 does not exist: the experiment has trials 0 to 2" in err


def test_render_refuses_credentials_in_the_tracking_uri_without_echoing_them(files, capsys):
    code, out, err = run(capsys, "render", str(files / "valid.yaml"), "--tracking-uri", "http://u:hunter2@m:5000")
    assert (code, out) == (2, "")
    assert "http://***@m:5000 carries credentials" in err and "tracking.credentialsSecret" in err
    assert "hunter2" not in err


def test_render_of_an_invalid_file_explains_on_stderr(files, capsys):
    code, out, err = run(capsys, "render", str(files / "invalid.yaml"))
    assert (code, out) == (1, "")
    assert "`spec.workers.replicas` must be greater than or equal to 1" in err


def test_crd_prints_the_generated_definition(capsys):
    code, out, _ = run(capsys, "crd")
    assert code == 0 and out == crd.to_yaml()


def test_run_and_operator_are_delegated_with_their_own_options(monkeypatch, capsys):
    calls = []

    def add_arguments(parser):
        parser.add_argument("file")
        parser.add_argument("--workers-dir")

    fake = types.SimpleNamespace(add_arguments=add_arguments, run=lambda args: calls.append(vars(args)) or 7)
    monkeypatch.setitem(sys.modules, "ringleader.launch.cli", fake)
    assert cli.main(["run", "x.yaml", "--workers-dir", "/tmp/w"]) == 7
    assert calls == [{"file": "x.yaml", "workers_dir": "/tmp/w"}]


def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    for command in ("validate", "render", "crd", "run", "operator", "publish", "version"):
        assert f"    {command} " in out


def test_validate_and_render_import_neither_torch_nor_kopf(files, repo_root):
    probe = (
        "import sys; from ringleader import cli\n"
        f"assert cli.main(['validate', {str(files / 'valid.yaml')!r}]) == 0\n"
        f"assert cli.main(['render', {str(files / 'valid.yaml')!r}]) == 0\n"
        "heavy = sorted({'torch', 'kopf', 'mlflow'} & set(sys.modules))\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                            env={"PYTHONPATH": str(repo_root / "operator"), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr

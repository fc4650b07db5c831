"""The `ringleader` command: validate explains, render prints objects, crd prints the CRD, run/operator delegate."""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import io
import json
import os
import pathlib
import platform
import re
import subprocess
import sys
import types

import pytest
import yaml

import ringleader
from ringleader import cli
from ringleader.api import loading
from ringleader.api import crd
from ringleader.topology import settings as render_settings

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


# A wrong type in `spec.model` used to hide every rule of `spec` until fixed: pydantic checks a model's
# rules only once its fields are valid.
TYPE_ERROR_AND_TWO_RULES = """\
apiVersion: ringleader.dev/v1alpha1
kind: DistributedTrainingExperiment
metadata: {name: hidden}
spec:
  architecture: RingAllReduce
  sync: {paradigm: SSP}
  model: {batchSize: "32"}
"""
HIDDEN_PROBLEMS = [
    ("spec.model.batchSize", "must be a valid integer (got '32')"),
    ("spec.sync.paradigm", "`sync.paradigm` must be BSP when `architecture` is RingAllReduce: allreduce is a "
                           "collective in which every worker waits for all; use ParameterServer or PeerToPeer for "
                           "ASP, SSP or DSSP"),
    ("spec.sync.staleness", "`sync.staleness` is required when `sync.paradigm` is SSP or DSSP: set it to how many "
                            "iterations the fastest worker may run ahead of the slowest (e.g. 3)"),
]


# Valid for a cluster, refused by `ringleader run`: the loopback has no network plugin to cap it.
NETWORK_ENFORCED = """\
apiVersion: ringleader.dev/v1alpha1
kind: DistributedTrainingExperiment
metadata: {name: capped}
spec:
  network: {enforcement: Network}
  sweep: {matrix: {bandwidth: [100Mbit, 1Gbit]}}
"""


@pytest.fixture
def files(tmp_path):
    (tmp_path / "valid.yaml").write_text(VALID)
    (tmp_path / "network.yaml").write_text(NETWORK_ENFORCED)
    (tmp_path / "invalid.yaml").write_text(INVALID)
    (tmp_path / "hidden.yaml").write_text(TYPE_ERROR_AND_TWO_RULES)
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
    # Each problem opens on its line in the file: the field's, or its object's for a rule over several fields.
    assert "  - line 6: `spec.workers.replicas` must be greater than or equal to 1 (got 0)" in lines
    assert "  - line 7: `spec.modle` is not a field of this object; did you mean `model`?" in lines
    assert "  - line 5: `sync.maxStaleness` must be greater than `sync.staleness`: DSSP moves " \
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


def test_render_puts_a_queued_trials_kueue_workload_first(tmp_path, capsys):
    path = tmp_path / "queued.yaml"
    path.write_text("apiVersion: ringleader.dev/v1alpha1\nkind: DistributedTrainingExperiment\n"
                    "metadata: {name: queued}\nspec: {scheduling: {queueName: lab}}\n")
    code, out, _ = run(capsys, "render", str(path))
    assert code == 0
    objects = list(yaml.safe_load_all(out))
    assert [o["kind"] for o in objects] == ["Workload", "Service", "ConfigMap", "Pod", "Pod", "Pod"]
    assert objects[0]["spec"]["queueName"] == "lab"
    assert [(s["name"], s["count"]) for s in objects[0]["spec"]["podSets"]] == [("ps", 1), ("worker", 2)]


def test_render_one_trial(files, capsys):
    code, out, _ = run(capsys, "render", str(files / "valid.yaml"), "--trial", "2", "--tracking-uri", "http://m:5000")
    assert code == 0
    objects = list(yaml.safe_load_all(out))
    assert {o["metadata"]["labels"]["ringleader.dev/trial"] for o in objects} == {"sweep-2"}
    env = {e["name"]: e["value"] for e in objects[2]["spec"]["containers"][0]["env"] if "value" in e}
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


def test_run_refuses_a_cap_the_network_must_enforce_and_says_what_to_do(files, capsys, monkeypatch):
    monkeypatch.chdir(files)  # were it to run, its records would land here
    assert run(capsys, "validate", str(files / "network.yaml"))[0] == 0  # a cluster can run it
    code, out, err = run(capsys, "run", str(files / "network.yaml"))
    assert (code, out) == (1, "")
    assert "`spec.network.enforcement` is Network (trial capped-0)" in err
    assert "`network.enforcement: Emulated`" in err and "bandwidth plugin" in err
    assert not (files / "ringleader-runs").exists()


def test_crd_prints_the_generated_definition(capsys):
    code, out, _ = run(capsys, "crd")
    assert code == 0 and out == crd.to_yaml()


def test_run_and_operator_are_delegated_with_their_own_options(monkeypatch, capsys):
    calls = []

    def add_arguments(parser):
        parser.add_argument("file")
        parser.add_argument("--workers-dir")
        parser.add_argument("--tracking-uri")  # every local command has it: the user's credentials go there only

    fake = types.SimpleNamespace(add_arguments=add_arguments, run=lambda args: calls.append(vars(args)) or 7)
    monkeypatch.setitem(sys.modules, "ringleader.launch.cli", fake)
    assert cli.main(["run", "x.yaml", "--workers-dir", "/tmp/w"]) == 7
    assert calls == [{"file": "x.yaml", "workers_dir": "/tmp/w", "tracking_uri": None}]


def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    for command in ("validate", "render", "crd", "run", "operator", "publish", "version"):
        assert f"    {command} " in out


def test_validate_render_and_version_import_neither_torch_nor_kopf(files, repo_root):
    probe = (
        "import sys; from ringleader import cli\n"
        f"assert cli.main(['validate', {str(files / 'valid.yaml')!r}]) == 0\n"
        f"assert cli.main(['render', {str(files / 'valid.yaml')!r}]) == 0\n"
        "assert cli.main(['version']) == 0\n"
        "heavy = sorted({'torch', 'kopf', 'mlflow'} & set(sys.modules))\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                            env={"PYTHONPATH": str(repo_root / "operator"), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr


def ringleader_command(repo_root, *argv: str, stdin: str = "") -> subprocess.CompletedProcess:
    """The real command in a child process: its own stdin, stdout, stderr and exit status."""
    return subprocess.run([sys.executable, "-m", "ringleader.cli", *argv], input=stdin, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(repo_root / "operator")})


def test_ringleader_alone_prints_the_help_on_stdout_and_exits_0(repo_root):
    # As kubectl and helm do: the bare command asks for help, it is not a usage error.
    alone = ringleader_command(repo_root)
    assert (alone.returncode, alone.stderr) == (0, "")
    assert alone.stdout.startswith("usage: ringleader ")
    for command in ("validate", "render", "crd", "run", "operator", "publish", "report", "version"):
        assert f"    {command} " in alone.stdout
    assert "exit status: 0 ok, 1 invalid input or failed, 2 usage" in " ".join(alone.stdout.split())


def test_version_shows_ringleader_python_and_the_installed_components(capsys):
    expected = {"ringleader": ringleader.__version__, "python": platform.python_version(),
                **{name: importlib.metadata.version(name) for name in ("torch", "mlflow", "kopf")}}
    code, out, err = run(capsys, "version")
    assert (code, err) == (0, "")
    assert out.splitlines() == [f"{name} {number}" for name, number in expected.items()]
    code, out, _ = run(capsys, "version", "-o", "json")
    assert code == 0 and json.loads(out) == expected
    code, out, _ = run(capsys, "version", "-o", "yaml")
    assert code == 0 and yaml.safe_load(out) == expected
    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])
    assert exited.value.code == 0 and capsys.readouterr().out == f"ringleader {ringleader.__version__}\n"


def test_validate_reports_a_type_error_and_the_two_rules_it_used_to_hide(files, capsys):
    code, out, err = run(capsys, "validate", str(files / "hidden.yaml"))
    assert (code, out) == (1, "")
    assert err.splitlines() == [
        f"{files / 'hidden.yaml'}: invalid",
        f"  - line 7: `{HIDDEN_PROBLEMS[0][0]}` {HIDDEN_PROBLEMS[0][1]}",
        # A rule names its fields itself; its line is its field's (sync: line 6), or its object's when it is missing.
        *(f"  - line 6: {message}" for _, message in HIDDEN_PROBLEMS[1:]),
    ]


def test_validate_as_json_gives_one_document_per_file_with_every_problem_at_its_field(files, capsys):
    names = ("valid.yaml", "hidden.yaml", "invalid.yaml", "absent.yaml")
    code, out, err = run(capsys, "validate", "-o", "json", *(str(files / name) for name in names))
    assert code == 1
    documents = [json.loads(line) for line in out.splitlines()]  # JSON Lines, in the order given
    assert [d["file"] for d in documents] == [str(files / name) for name in names]
    assert [d["valid"] for d in documents] == [True, False, False, False]
    valid, hidden, invalid, absent = documents
    assert valid["problems"] == [] and valid["trials"][2] == {
        "name": "sweep-2", "architecture": "RingAllReduce", "paradigm": "BSP", "worldSize": 2,
        "parameters": {"architecture": "RingAllReduce", "paradigm": "BSP"}}
    assert valid["skipped"] == [{"parameters": {"architecture": "RingAllReduce", "paradigm": "SSP"},
                                 "reason": "RingAllReduce runs BSP only, not SSP"}]
    assert [(p["field"], p["message"]) for p in hidden["problems"]] == HIDDEN_PROBLEMS
    assert {p["field"] for p in invalid["problems"]} == {"spec.workers.replicas", "spec.modle",
                                                         "spec.sync.maxStaleness"}
    assert absent["problems"] == [{"field": None, "message": "file not found"}]
    assert all(d["trials"] == [] and d["skipped"] == [] for d in documents[1:])
    # Problems still go to stderr, for the person watching; stdout stays a clean stream of documents.
    assert f"{files / 'hidden.yaml'}: invalid" in err and f"{files / 'absent.yaml'}: file not found" in err

    code, out, _ = run(capsys, "validate", "-o", "yaml", *(str(files / name) for name in names))
    assert code == 1 and list(yaml.safe_load_all(out)) == documents


def test_every_command_taking_a_file_reads_standard_input_as_stdin(files, repo_root):
    validated = ringleader_command(repo_root, "validate", "-o", "json", "-", stdin=VALID)
    assert validated.returncode == 0, validated.stderr
    assert json.loads(validated.stdout)["file"] == "<stdin>" and len(json.loads(validated.stdout)["trials"]) == 3

    rendered = ringleader_command(repo_root, "render", "-", "--trial", "1", stdin=VALID)
    assert rendered.returncode == 0, rendered.stderr
    assert {o["metadata"]["labels"]["ringleader.dev/trial"] for o in yaml.safe_load_all(rendered.stdout)} == {
        "sweep-1"}

    refused = ringleader_command(repo_root, "run", "-", stdin=TYPE_ERROR_AND_TWO_RULES)
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr.startswith("<stdin>: invalid\n")  # as validate says it
    assert all(message in refused.stderr for _, message in HIDDEN_PROBLEMS)


def test_standard_input_is_read_once(capsys):
    code, out, err = run(capsys, "validate", "-", "-")
    assert (code, out) == (2, "")
    assert "'-' (standard input) can be read once" in err


@pytest.mark.parametrize("given, shown", [("broken.yaml", None), ("-", "<stdin>")])
def test_a_yaml_error_names_the_file_and_the_line(tmp_path, monkeypatch, capsys, given, shown):
    text = VALID.replace("metadata: {name: sweep}", "metadata: name: sweep")  # line 3
    (tmp_path / "broken.yaml").write_text(text)
    monkeypatch.chdir(tmp_path)
    said = set()
    for command in ("validate", "render", "run"):
        monkeypatch.setattr(sys, "stdin", types.SimpleNamespace(buffer=io.BytesIO(text.encode())))
        code, out, err = run(capsys, command, given)
        assert (code, out) == (1, "")
        # What is wrong is the parser's to word (libyaml's or PyYAML's own); the file, the place and the line
        # with a caret under the column are ours, in the same words whichever command read the file.
        problem, line, caret = err.splitlines()
        assert problem.startswith(f"{shown or given}: not valid YAML: ")
        assert problem.endswith((" at line 3, column 15", f" at line 3, column 15{loading.INDENTATION_HINT}"))
        assert line == "  3 | metadata: name: sweep" and caret.index("^") - caret.index("|") - 1 == 15
        said.add(err)
    assert len(said) == 1


# One scheme for every command (contract/exits.py, docs/cli.md): 0 ok, 1 the input is invalid or the work
# failed, 2 the command line must change. A failed trial's 1 is tested with real ranks in
# tests/integration/launch/test_run.py.
EXIT_STATUSES = [
    (["crd"], 0),
    (["version"], 0),
    (["validate", "{files}/valid.yaml"], 0),
    (["validate", "{files}/invalid.yaml"], 1),
    (["validate", "{files}/absent.yaml"], 1),
    (["render", "{files}/hidden.yaml"], 1),
    (["run", "{files}/invalid.yaml"], 1),
    (["run", "{files}/network.yaml"], 1),
    (["publish", "{files}"], 1),  # holds no run, as a missing file
    (["whatif", "{files}/valid.yaml"], 1),  # not a profile file (JSON)
    (["predict", "{files}"], 1),  # holds no run
    (["profile", "{files}/invalid.yaml"], 1),
    (["nonsense"], 2),
    (["validate"], 2),
    (["validate", "-o", "xml", "{files}/valid.yaml"], 2),
    (["render", "{files}/valid.yaml", "--trial", "9"], 2),
    (["render", "{files}/valid.yaml", "--tracking-uri", "http://u:p@m:5000"], 2),
    (["run"], 2),
    (["run", "{files}/valid.yaml", "--trial", "9"], 2),
    (["run", "{files}/valid.yaml", "--timeout-seconds", "0"], 2),
    (["run", "{files}/valid.yaml", "--env", "RANK"], 2),
    (["run", "{files}/valid.yaml", "--output-dir", "{files}/valid.yaml/runs"], 2),
    (["publish"], 2),
    (["whatif"], 2),
    (["whatif", "{files}/valid.yaml", "--workers", "0"], 2),
    (["predict"], 2),
    (["predict", "{files}", "--bucket-mib", "0"], 2),
    (["predict", "{files}", "-o", "xml"], 2),
    (["profile"], 2),
    (["profile", "{files}/valid.yaml", "--trial", "9"], 2),
    (["profile", "{files}/valid.yaml", "--iterations", "1"], 2),
    (["operator", "--no-such-option"], 2),
]


@pytest.mark.parametrize("argv, status", EXIT_STATUSES, ids=[" ".join(argv) for argv, _ in EXIT_STATUSES])
def test_every_command_exits_0_ok_1_invalid_or_failed_2_usage_with_problems_on_stderr(files, capsys, monkeypatch,
                                                                                      argv, status):
    monkeypatch.chdir(files)  # were a case to run, its records would land here
    try:
        code = cli.main([part.format(files=files) for part in argv])
    except SystemExit as exited:  # argparse's own refusals
        code = exited.code
    captured = capsys.readouterr()
    assert code == status, captured.err
    if status:
        assert captured.out == "" and captured.err.strip(), captured


CLI_DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_the_cli_page_shows_what_validate_prints(repo_root, monkeypatch, capsys):
    [block] = re.findall(r"```console\n\$ ringleader validate (\S+)\n(.*?)```", CLI_DOCS.read_text(), re.S)
    monkeypatch.chdir(repo_root)
    code, out, err = run(capsys, "validate", block[0])
    assert (code, out, err) == (0, block[1], "")


def test_the_cli_page_lists_every_command_and_its_own_options():
    page = CLI_DOCS.read_text()
    parser = cli.build_parser()
    [commands] = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    for name, subparser in commands.choices.items():
        assert f"`ringleader {name}" in page, name
        if name in cli.DELEGATED:
            subparser = argparse.ArgumentParser()
            importlib.import_module(cli.DELEGATED[name][0]).add_arguments(subparser)
        if name == "operator":
            continue  # its flags are listed in docs/operator.md, which the page links
        for action in subparser._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help") and option not in operator_pod_flags():
                    assert f"`{option}" in page, f"ringleader {name} {option}"
    for status in ("| 0 |", "| 1 |", "| 2 |", "| 128 + N |"):
        assert status in page


def operator_pod_flags() -> set[str]:
    """`render`'s flags that are the operator's own, listed in docs/operator.md."""
    parser = argparse.ArgumentParser()
    render_settings.add_arguments(parser)
    return {option for action in parser._actions for option in action.option_strings}


def test_the_readme_links_the_cli_page():
    readme = (CLI_DOCS.parents[1] / "README.md").read_text()
    assert "(docs/cli.md)" in readme


@pytest.mark.parametrize("command", ["report", "predict", "whatif"])
def test_an_experiment_file_given_where_a_run_is_read_is_said_the_same_way_by_each_command(command, files, capsys):
    experiment = files / "valid.yaml"
    code, out, err = run(capsys, command, str(experiment))
    assert (code, out) == (1, "")
    assert err == (f"ringleader {command}: {experiment}: an experiment file, not a run: run it first (`ringleader run "
                   f"{experiment}`), then name its run directory, or ringleader-runs/ for the newest\n")

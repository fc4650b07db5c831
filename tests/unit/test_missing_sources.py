"""A SOURCE that can only be a path and names nothing is refused in the words of the shell ("no such file or
directory") by every command that reads runs, instead of being looked up in MLflow as a run or experiment name."""

from __future__ import annotations

import pytest

from ringleader import cli
from ringleader.contract import layout

COMMANDS = ("report", "predict", "whatif")


@pytest.mark.parametrize("source", ["./nope", "../nope", "/no/such/run", "runs/nope"])
@pytest.mark.parametrize("command", COMMANDS)
def test_a_path_that_names_nothing_is_no_such_file_and_creates_no_store(tmp_path, monkeypatch, capsys, command,
                                                                        source):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    assert cli.main([command, source]) == 1
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"ringleader {command}: {source}: no such file or directory\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]  # no mlflow.db left behind


@pytest.mark.parametrize("source", ["default/quickstart", "quickstart", "0123456789abcdef", "."])
def test_what_may_be_an_mlflow_name_or_an_existing_directory_is_not_refused_as_a_path(tmp_path, monkeypatch, source):
    monkeypatch.chdir(tmp_path)
    assert layout.missing_path(source) is None


def test_a_name_under_a_directory_that_exists_here_is_a_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ringleader-runs").mkdir()
    assert layout.missing_path("ringleader-runs/typo") == "ringleader-runs/typo: no such file or directory"
    assert layout.missing_path("~/no-such-ringleader-dir") == "~/no-such-ringleader-dir: no such file or directory"

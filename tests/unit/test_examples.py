"""The examples are valid, say how to run them, stay small where they promise to, and their README tells the truth."""

from __future__ import annotations

import pathlib
import re

import pytest

from ringleader import api, cli, topology

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
TRIALS = {"quickstart.yaml": 3, "study-1-architectures.yaml": 48, "study-3-bandwidth.yaml": 5,
          "study-4-dssp-straggler.yaml": 4, "gpu-ring.yaml": 1, "digits-time-to-accuracy.yaml": 2,
          "kueue-queue.yaml": 3}


def test_the_promised_examples_exist():
    assert {path.name for path in EXAMPLES} == set(TRIALS)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_validates_and_renders(path, capsys):
    assert cli.main(["validate", str(path)]) == 0
    expansion = api.expand(api.load(path))
    assert len(expansion.trials) == TRIALS[path.name]
    for trial in expansion.trials[:4]:
        assert topology.render(trial)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_opens_with_what_it_shows_and_how_to_run_it(path):
    header = "".join(line for line in path.read_text().splitlines(True) if line.startswith("#"))
    assert "What it shows:" in header
    relative = f"examples/{path.name}"
    for command in (f"ringleader validate {relative}", f"ringleader run {relative}", f"kubectl apply -f {relative}"):
        assert command in header, f"{path.name} should show `{command}`"


def test_the_quickstart_is_small_enough_for_a_laptop():
    for trial in api.expand(api.load(ROOT / "examples" / "quickstart.yaml")).trials:
        spec = trial.spec
        assert spec.model.name == "mlp" and spec.model.iterations <= 50 and spec.model.batch_size <= 32
        assert spec.workers.replicas == 2 and trial.world_size <= 3
    assert {t.spec.architecture for t in api.expand(api.load(ROOT / "examples" / "quickstart.yaml")).trials} == set(
        api.Architecture)


def test_the_straggler_study_keeps_dssps_published_settings():
    trials = api.expand(api.load(ROOT / "examples" / "study-4-dssp-straggler.yaml")).trials
    assert [t.spec.sync.paradigm.value for t in trials] == ["BSP", "ASP", "SSP", "DSSP"]
    sync = trials[-1].spec.sync
    assert (sync.staleness, sync.max_staleness) == (3, 12)
    assert [s.slowdown_percent for s in trials[0].worker_slots()] == [100, 100, 100, 300]


def test_the_readme_lists_every_example():
    readme = (ROOT / "examples" / "README.md").read_text()
    for path in EXAMPLES:
        assert f"[`{path.name}`]({path.name})" in readme


def console_blocks(text: str) -> list[tuple[str, str]]:
    """(command, printed output) of every `$ ringleader validate` in the README's console blocks."""
    found = []
    for block in re.findall(r"```console\n(.*?)```", text, re.S):
        for match in re.finditer(r"^\$ ringleader validate (\S+)\n((?:[^$].*\n)*)", block, re.M):
            found.append((match.group(1), match.group(2)))
    return found


def test_the_readmes_validate_outputs_are_what_validate_prints(tmp_path, monkeypatch, capsys):
    # broken.yaml is the straggler study with its staleness bounds the wrong way round.
    study = (ROOT / "examples" / "study-4-dssp-straggler.yaml").read_text()
    (tmp_path / "broken.yaml").write_text(study.replace("maxStaleness: 12", "maxStaleness: 2"))
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(tmp_path)
    blocks = console_blocks((ROOT / "examples" / "README.md").read_text())
    assert [command for command, _ in blocks] == [
        "examples/quickstart.yaml", "examples/study-4-dssp-straggler.yaml", "broken.yaml"]
    for file, printed in blocks:
        code = cli.main(["validate", file])
        shown = capsys.readouterr()
        assert code == (1 if file == "broken.yaml" else 0)
        assert (shown.err if code else shown.out) == printed  # problems on stderr, trials on stdout
        assert (shown.out if code else shown.err) == ""

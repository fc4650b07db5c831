"""The examples are valid, say how to run them, stay small where they promise to, and their README tells the truth."""

from __future__ import annotations

import pathlib
import re

import pytest

from ringleader import api, cli, topology
from ringleader.api import variants

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
TRIALS = {"quickstart.yaml": 3, "study-1-architectures.yaml": 48, "study-3-bandwidth.yaml": 5,
          "study-4-dssp-straggler.yaml": 4, "gpu-ring.yaml": 1, "digits-time-to-accuracy.yaml": 2,
          "kueue-queue.yaml": 3, "compression-digits.yaml": 5, "two-level.yaml": 4}
LAPTOP = sorted((ROOT / "examples" / "laptop").glob("*.yaml"))
STUDY_ONE = {variants.Architecture.PARAMETER_SERVER, variants.Architecture.PEER_TO_PEER,
             variants.Architecture.RING_ALL_REDUCE}
"""STUDY_ONE: the architectures study 1 compares (the two-level ones have an example of their own, two-level.yaml)."""
LAPTOP_TRIALS = {"study-1-architectures.yaml": 9, "study-2-dag-overlap.yaml": 1, "study-3-bandwidth.yaml": 12,
                 "study-4-dssp-straggler.yaml": 4}


def test_the_promised_examples_exist():
    assert {path.name for path in EXAMPLES} == set(TRIALS)


def test_every_study_has_a_laptop_scale():
    assert {path.name for path in LAPTOP} == set(LAPTOP_TRIALS)


@pytest.mark.parametrize("path", EXAMPLES + LAPTOP, ids=lambda p: p.parent.name + "/" + p.name)
def test_every_example_validates_and_renders(path, capsys):
    assert cli.main(["validate", str(path)]) == 0
    expansion = api.expand(api.load(path))
    assert len(expansion.trials) == (LAPTOP_TRIALS if path.parent.name == "laptop" else TRIALS)[path.name]
    for trial in expansion.trials[:4]:
        assert topology.render(trial)


@pytest.mark.parametrize("path", EXAMPLES + LAPTOP, ids=lambda p: p.parent.name + "/" + p.name)
def test_every_example_opens_with_what_it_shows_and_how_to_run_it(path):
    header = "".join(line for line in path.read_text().splitlines(True) if line.startswith("#"))
    assert "What it shows:" in header
    relative = path.relative_to(ROOT).as_posix()
    for command in (f"ringleader validate {relative}", f"ringleader run {relative}", f"kubectl apply -f {relative}"):
        assert command in header, f"{path.name} should show `{command}`"


def test_the_quickstart_is_small_enough_for_a_laptop():
    for trial in api.expand(api.load(ROOT / "examples" / "quickstart.yaml")).trials:
        spec = trial.spec
        assert spec.model.name == "mlp" and spec.model.iterations <= 50 and spec.model.batch_size <= 32
        assert spec.workers.replicas == 2 and trial.world_size <= 3
    assert {t.spec.architecture
            for t in api.expand(api.load(ROOT / "examples" / "quickstart.yaml")).trials} == STUDY_ONE


@pytest.mark.parametrize("path", LAPTOP, ids=lambda p: p.name)
def test_the_laptop_studies_stay_small_enough_for_two_cores(path):
    # Each must finish within 10 minutes on 2 shared cores: small models, few ranks, few iterations (study 3's
    # 12 trials of 40 iterations, bandwidth x compression, took 5 minutes at load average 6 to 20).
    trials = api.expand(api.load(path)).trials
    assert len(trials) <= 12
    for trial in trials:
        spec = trial.spec
        assert spec.model.name in ("mlp", "cnn") and spec.model.batch_size <= 128
        assert trial.world_size <= 5
        assert spec.model.iterations * len(trials) <= 1600
        assert spec.model.iterations <= 40 or spec.model.target and spec.model.target.on_reached.value == "Stop"


def laptop(name: str) -> list:
    return api.expand(api.load(ROOT / "examples" / "laptop" / name)).trials


def test_the_laptop_studies_keep_what_makes_each_study():
    one = laptop("study-1-architectures.yaml")
    assert {t.spec.architecture for t in one} == STUDY_ONE
    assert len({t.spec.workers.replicas for t in one}) >= 3 and all(t.spec.network.bandwidth for t in one)
    (two,) = laptop("study-2-dag-overlap.yaml")
    assert two.spec.architecture == variants.Architecture.RING_ALL_REDUCE and two.spec.network.bandwidth
    three = laptop("study-3-bandwidth.yaml")
    assert len({t.spec.network.bandwidth for t in three}) >= 4
    assert {t.spec.architecture for t in three} == {variants.Architecture.RING_ALL_REDUCE}
    assert {(t.spec.network.bandwidth, t.spec.compression.method.value) for t in three} >= {
        (bandwidth, method) for bandwidth in ("10Mbit", "100Mbit") for method in ("None", "FP16", "PowerSGD")}
    four = laptop("study-4-dssp-straggler.yaml")
    assert [t.spec.sync.paradigm.value for t in four] == ["BSP", "ASP", "SSP", "DSSP"]
    assert (four[-1].spec.sync.staleness, four[-1].spec.sync.max_staleness) == (3, 15)  # extra iterations r in [0, 12]
    assert [s.slowdown_percent for s in four[0].worker_slots()] == [100, 100, 100, 300]
    assert four[0].spec.data.format.value == "Digits" and four[0].spec.model.target.accuracy_percent


def test_the_straggler_study_keeps_dssps_published_settings():
    trials = api.expand(api.load(ROOT / "examples" / "study-4-dssp-straggler.yaml")).trials
    assert [t.spec.sync.paradigm.value for t in trials] == ["BSP", "ASP", "SSP", "DSSP"]
    sync = trials[-1].spec.sync
    # The published s_L = 3 and r in [0, 12]: ringleader's r goes up to maxStaleness - staleness.
    assert (sync.staleness, sync.max_staleness - sync.staleness) == (3, 12)
    assert [s.slowdown_percent for s in trials[0].worker_slots()] == [100, 100, 100, 300]


def test_the_readme_lists_every_example():
    readme = (ROOT / "examples" / "README.md").read_text()
    for path in EXAMPLES:
        assert f"[`{path.name}`]({path.name})" in readme
    for path in LAPTOP:
        assert f"[`laptop/{path.name}`](laptop/{path.name})" in readme


def test_the_studies_page_shows_how_to_run_every_laptop_study():
    page = (ROOT / "docs" / "studies.md").read_text()
    for path in LAPTOP:
        assert f"ringleader run examples/laptop/{path.name}" in page
    assert "paper" not in page.lower()


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
    (tmp_path / "broken.yaml").write_text(study.replace("maxStaleness: 15", "maxStaleness: 2"))
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

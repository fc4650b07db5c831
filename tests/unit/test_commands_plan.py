"""`ringleader predict --profile P --network N`: the plan printed, written and refused, on the shipped example files
(a CSV of layers, nccl-tests and OSU outputs; the models' numbers themselves: test_planning_at_scale.py)."""

from __future__ import annotations

import json
import pathlib

import pytest

from ringleader import cli

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "planning"
PROFILE = EXAMPLES / "layers.csv"


def run(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main([str(part) for part in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("network", ["network.yaml", "network-osu.yaml", "network-given.yaml"])
def test_a_plan_names_the_fastest_at_each_count_and_writes_its_table_json_and_figure(tmp_path, capsys, network):
    code, out, err = run(capsys, "predict", "--profile", PROFILE, "--network", EXAMPLES / network,
                         "--workers", 8, 16, 32, "--ranks-per-node", 4, "--save", tmp_path / "plan")
    assert code == 0, err
    answer = out.split("The answer:\n")[1].splitlines()[:3]
    assert [line.split(":")[0].strip() for line in answer] == ["8 workers", "16 workers", "32 workers"]
    rows = [line.split() for line in out.splitlines() if line.split()[:1] and line.split()[0] in
            ("1ps", "4ps", "p2p", "ring", "hring", "1psagg", "4psagg")]
    assert {(row[0], int(row[1])) for row in rows} == {(label, n) for label in
                                                       ("1ps", "4ps", "p2p", "ring", "hring", "1psagg", "4psagg")
                                                       for n in (8, 16, 32)}
    assert "no validated band" in out
    document = json.loads((tmp_path / "plan" / "plan.json").read_text())
    assert document["ranksPerNode"] == 4 and document["band"] is None
    assert [r["workers"] for r in document["architectures"]["hring"]] == [8, 16, 32]
    assert (tmp_path / "plan" / "plan.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "plan" / "plan.txt").read_text() == out
    assert f"the plan is in {tmp_path / 'plan'}" in err


def test_json_is_the_plans_document_on_stdout(tmp_path, capsys):
    code, out, _ = run(capsys, "predict", "--profile", PROFILE, "--network", EXAMPLES / "network.yaml",
                       "--workers", 2, 4, "--save", tmp_path, "-o", "json")
    assert code == 0
    assert json.loads(out) == json.loads((tmp_path / "plan.json").read_text())


def test_without_workers_one_two_four_and_eight_nodes_are_planned(tmp_path, capsys):
    code, out, _ = run(capsys, "predict", "--profile", PROFILE, "--network", EXAMPLES / "network.yaml",
                       "--ranks-per-node", 4, "--save", tmp_path, "-o", "json")
    assert code == 0
    assert [r["workers"] for r in json.loads(out)["architectures"]["ring"]] == [4, 8, 16, 32]


@pytest.mark.parametrize("argv, said", [
    (["--profile", PROFILE], "planning needs both --profile FILE and --network FILE"),
    (["some-run", "--profile", PROFILE, "--network", EXAMPLES / "network.yaml"], "give SOURCE (some-run) or --profile"),
    (["--profile", PROFILE, "--network", EXAMPLES / "network.yaml", "--trial", "t"], "--trial name a trial's records"),
    (["--profile", PROFILE, "--network", EXAMPLES / "network.yaml", "--workers", 6, "--ranks-per-node", 4],
     "--workers 6: not a multiple of --ranks-per-node 4"),
    ([], "give SOURCE (a trial or run directory, or an MLflow run or experiment), or --profile FILE and --network"),
])
def test_options_that_do_not_go_together_are_refused_with_status_2(tmp_path, capsys, argv, said):
    code, out, err = run(capsys, "predict", *argv, "--save", tmp_path / "plan")
    assert (code, out) == (2, "")
    assert said in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "plan").exists()


def test_a_network_that_cannot_be_read_is_refused_in_one_line_naming_it_and_nothing_is_written(tmp_path, capsys):
    broken = tmp_path / "osu.txt"
    broken.write_text("# OSU MPI Bandwidth Test v7.3\n# Size      Bandwidth (MB/s)\n1    nan\n2    4.5\n")
    code, out, err = run(capsys, "predict", "--profile", PROFILE, "--network", broken, "--save", tmp_path / "plan")
    assert (code, out) == (1, "")
    assert err.startswith(f"ringleader predict: {broken}:3:") and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "plan").exists()


def test_compressions_are_planned_beside_the_uncompressed_exchange_and_their_codecs_said_unpriced(tmp_path, capsys):
    code, out, err = run(capsys, "predict", "--profile", PROFILE, "--network", EXAMPLES / "network.yaml",
                         "--workers", 8, "--compressions", "fp16", "PowerSGD:4", "TopK:0.05", "--save", tmp_path)
    assert code == 0, err
    labels = {line.split()[0] for line in out.splitlines() if "+" in (line.split() or [""])[0]}
    assert {"1ps+FP16", "p2p+FP16", "ring+FP16", "ring+PowerSGD", "ring+TopK"} <= labels
    assert "codec's time is not priced" in out


@pytest.mark.parametrize("said, message", [
    ("Zip", "--compressions Zip: not a method; give FP16, BF16, PowerSGD, TopK"),
    ("FP16:3", "--compressions FP16:3: FP16 takes no value"),
    ("PowerSGD:0", "--compressions PowerSGD:0: rank"),
    ("TopK:2", "--compressions TopK:2: ratio"),
])
def test_a_compression_that_cannot_be_is_refused_with_status_2(tmp_path, capsys, said, message):
    code, out, err = run(capsys, "predict", "--profile", PROFILE, "--network", EXAMPLES / "network.yaml",
                         "--compressions", said, "--save", tmp_path / "plan")
    assert (code, out) == (2, "")
    assert message in err and len(err.strip().splitlines()) == 1

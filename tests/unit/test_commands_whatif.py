"""`ringleader whatif` on a hand-made profile file: the table, the compression search, the add-cost options, the
plot."""

from __future__ import annotations

import json
import re

import pytest

from ringleader import cli
from ringleader.models import addcost, profile
from ringleader.commands import addcalibration

# test_models_whatif.py's backward: A (1 MB) at 0 ms, B (1 MB) at 10 ms, C (2 MB) at 12 ms; backward 20 ms.
PROFILE = {"batchSeconds": 0.048, "backwardSeconds": 0.020, "gradients": [
    {"name": "C", "bytes": 2e6, "readySeconds": 0.012}, {"name": "A", "bytes": 1e6, "readySeconds": 0.0},
    {"name": "B", "bytes": 1e6, "readySeconds": 0.010}]}


@pytest.fixture
def profile_file(tmp_path):
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(PROFILE))
    return path


def whatif_(capsys, *argv):
    code = cli.main(["whatif", *map(str, argv)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def rows(out: str) -> dict[tuple[float, float], tuple[int, float, float]]:
    """(Gbit/s, compression) -> (buckets, overhead ms, SF) of the printed table(s)."""
    found = {}
    for match in re.finditer(r"^\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)(?:\s+\w+)?$", out, re.M):
        gbit, compression, buckets, overhead, sf = match.groups()
        found[float(gbit), float(compression)] = (int(buckets), float(overhead), float(sf))
    return found


def test_the_table_of_a_profile_file_matches_the_hand_computed_model(profile_file, capsys):
    code, out, err = whatif_(capsys, profile_file, "--workers", 2, "--bandwidths", 0.1, 1, "--compressions", 1, 4)
    assert (code, err) == (0, "")
    assert "3 gradients, 4.000 MB, backward 20.000 ms, t_batch 48.000 ms" in out
    table = rows(out)
    # 1 Gbit/s: overhead 16 ms, SF 48/64; 100 Mbit/s: 300 ms; c = 4 at 100 Mbit/s: 60 ms (test_models_whatif.py)
    assert table[1, 1] == (2, 16.0, 0.75)
    assert table[0.1, 1][1] == 300.0 and table[0.1, 4][1] == 60.0


def test_links_fast_enough_for_backward_to_hide_every_round_are_said_to_change_nothing(profile_file, capsys):
    _, out, _ = whatif_(capsys, profile_file, "--workers", 2, "--bandwidths", 1, 100, 200, "--compressions", 1)
    assert rows(out)[100, 1][1] == rows(out)[200, 1][1] == 0.0
    table, below = out.split("\nN = 2\n")[1].split("\n\n")[0].split("\nat and above ")  # the sentence under it
    assert rows(table) and " ".join(below.split()).startswith("100 Gbit/s backward (every round ends before it")
    assert " ".join(below.split()).endswith("bounds the iteration; faster links change nothing")
    _, out, _ = whatif_(capsys, profile_file, "--workers", 2, "--bandwidths", 0.1, 1, "--compressions", 1)
    assert "faster links change nothing" not in out  # 1 Gbit/s still gains over 100 Mbit/s


def test_a_codec_cost_is_added_where_the_table_compresses(profile_file, capsys):
    _, out, _ = whatif_(capsys, profile_file, "--workers", 2, "--bandwidths", 0.1, "--compressions", 1, 4,
                        "--codec-ms", 5)
    assert "codec: 5.000 ms per iteration added to the overhead when c > 1" in out
    assert rows(out)[0.1, 1][1] == 300.0 and rows(out)[0.1, 4][1] == 65.0


def test_a_compressed_ranks_measured_ratio_and_codec_join_the_table(tmp_path, capsys):
    rank = tmp_path / "rank-0"
    rank.mkdir()
    (rank / "layers.json").write_text(json.dumps({
        "parameters": [{"name": g["name"], "bytes": g["bytes"]} for g in PROFILE["gradients"]],
        "iterations": [{"step": 1, "backwardStart": 0.0, "backwardEnd": 0.020,
                        "ready": {g["name"]: g["readySeconds"] for g in PROFILE["gradients"]}}]}))
    (rank / "iterations.jsonl").write_text("\n".join(json.dumps(
        {"step": 1, "role": "worker", "warmup": False, "time/data": 0.0, "time/forward": 0.016, "time/backward": 0.020,
         "time/update": 0.012, "time/codec": 0.005, "time/comm": 0.010, "time/iteration": 0.063, "bytes/sent": 2.5e5,
         "bytes/uncompressed": 1e6}) for _ in range(3)))
    code, out, err = whatif_(capsys, rank, "--workers", 2, "--bandwidths", 0.1, "--compressions", 1)
    assert (code, err) == (0, "")
    assert ("measured compression: measured, c = 4.0000 (bytes uncompressed over sent) in 1 round(s), encode and "
            "decode 5.000 ms") in out
    # A rank's buckets are the runtime's (reverse order, the first closed past 1 MiB): [B, A] ready at 10 ms, [C] at
    # 12 ms. 100 Mbit/s: 160 ms each, 10..170..330: 310 ms; c = 4: 40 ms each, 10..50..90: 70 ms, and the codec's 5.
    assert "the runtime's buckets" in out
    assert rows(out)[0.1, 1][1] == 310.0 and rows(out)[0.1, 4][1] == 75.0  # the trial's own point, its codec paid


def test_the_fusion_options_change_the_buckets(profile_file, capsys):
    # A 20 ms cycle time fuses all three gradients; a 2 MB threshold (1.9 MiB) splits B from C again.
    _, out, _ = whatif_(capsys, profile_file, "--workers", 2, "--bandwidths", 1, "--compressions", 1,
                        "--cycle-time-ms", 20)
    assert rows(out)[1, 1][:2] == (1, 24.0)  # one 4 MB bucket from 12 ms for 32 ms: ends at 44 ms
    _, out, _ = whatif_(capsys, profile_file, "--workers", 2, "--bandwidths", 1, "--compressions", 1,
                        "--cycle-time-ms", 20, "--fusion-threshold-mib", 1.9)
    assert rows(out)[1, 1][0] == 3


def test_the_compression_search_prints_the_exact_ratio_and_unreachable_targets(profile_file, capsys):
    code, out, _ = whatif_(capsys, profile_file, "--workers", 2, "--bandwidths", 0.1, "--target-sf", 0.85)
    assert code == 0
    hand = 240 / (0.048 / 0.85 - 0.048 + 0.008) / 1000  # test_models_whatif.py derives it
    [printed] = re.findall(r"N=2 0.1 Gbit/s: ([\d.]+)", out)
    assert float(printed) == pytest.approx(hand, abs=1e-4)
    # 10 ms per add call: the best SF is 0.96 (test_models_whatif.py)
    _, out, _ = whatif_(capsys, profile_file, "--workers", 2, "--bandwidths", 0.1, "--target-sf", 0.97,
                        "--add-fixed-us", 10000)
    assert "N=2 0.1 Gbit/s: unreachable (even infinite compression gives SF 0.9600)" in out


def test_an_add_table_file_is_read_back_and_used(profile_file, tmp_path, capsys):
    # 1 ms per call at any size up to 1 MB: N = 2 adds once per bucket, 2 buckets at 1 Gbit/s -> ends 9 ms and
    # max(9, 12) + 24 + 1 = 37 ms: overhead 17 ms.
    table = tmp_path / "add.json"
    table.write_text(json.dumps(addcost.AddTable((1.0, 2e6), (1e-3, 1e-3)).to_document()))
    code, out, _ = whatif_(capsys, profile_file, "--workers", 2, "--bandwidths", 1, "--compressions", 1,
                           "--add-table", table)
    assert code == 0 and rows(out)[1, 1][1] == 17.0
    assert f"add: table {table} (cpu: 1000.00 us at " in out


def test_the_plot_is_a_png(profile_file, tmp_path, capsys):
    plot = tmp_path / "plots" / "whatif.png"
    code, out, _ = whatif_(capsys, profile_file, "--workers", 2, 8, "-o", plot)
    assert code == 0 and f"Plot: {plot}" in out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_calibration_times_torch_add_and_writes_a_table_the_command_reads_back(tmp_path):
    table = addcalibration.calibrate("cpu", (1024, 1024 * 1024), budget_seconds=0.2)
    assert table.sizes_bytes == (1024.0, 1048576.0) and all(s > 0 for s in table.seconds)
    assert table.seconds[1] > table.seconds[0]  # a thousand times more bytes to add
    assert addcost.AddTable.from_document(json.loads(json.dumps(table.to_document()))) == table


@pytest.mark.parametrize("argv, message", [
    (["--workers", "0"], "--workers must be greater than or equal to 1"),
    (["--compressions", "0.5"], "--compressions must be greater than or equal to 1"),
    (["--target-sf", "1.5"], "--target-sf must be greater than 0 and at most 1"),
    (["--add-ns-per-byte", "1", "--add-table", "t.json"], "each set the add cost: give one of them"),
    (["--cycle-time-ms", "0"], "--cycle-time-ms, --fusion-threshold-mib and --bucket-mib must be greater than 0"),
])
def test_wrong_options_are_usage_errors(profile_file, capsys, argv, message):
    code, out, err = whatif_(capsys, profile_file, *argv)
    assert (code, out) == (2, "") and message in err


def test_bad_sources_fail_with_what_is_wrong(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.json").write_text("{oops")
    code, out, err = whatif_(capsys, "notes.json")
    assert (code, out) == (1, "") and "notes.json: not a profile file: not JSON" in err
    code, out, err = whatif_(capsys, "absent")
    assert (code, out) == (1, "") and "absent: not a profile file or run directory, and no MLflow store" in err
    assert not (tmp_path / "mlflow.db").exists()
    (tmp_path / "bad.json").write_text(json.dumps({**PROFILE, "gradients": [{"bytes": -1, "readySeconds": 0}]}))
    code, _, err = whatif_(capsys, "bad.json")
    assert code == 1 and "`gradients[0].bytes` must be a number greater than or equal to 0" in err


def test_the_python_api_reads_the_same_profile(profile_file):
    found, batch = profile.from_document(json.loads(profile_file.read_text()))
    assert [g.name for g in found.in_ready_order()] == ["A", "B", "C"] and batch == 0.048


def test_a_peer_to_peer_trial_is_said_to_be_modelled_as_a_ring_and_its_own_point_is_in_the_defaults(monkeypatch,
                                                                                                    capsys):
    import sweeps
    from ringleader.commands import sources

    [trial] = sweeps.trials({"architecture": "PeerToPeer", "network": {"bandwidth": "200Mbit"}})
    found = sources.Found([sweeps.result_of(trial, layers=sweeps.layers_document())], "trial rep-0", True)
    monkeypatch.setattr(sources, "resolve", lambda *_, **__: found)
    code, out, err = whatif_(capsys, "rep-0")
    assert (code, err) == (0, "")
    first = out.splitlines()[0]
    assert first.startswith("trial rep-0 (a PeerToPeer trial: modelled as a ring allreduce of its gradients after "
                            "backward, not as its own exchange; `ringleader predict` prices PeerToPeer itself), rank 0")
    assert "with the trial's own point, N = 2 at 0.2 Gbit/s (its cap)" in out
    assert "\nN = 2\n" in out and "\nN = 8\n" in out
    assert {gbit for gbit, _ in rows(out)} == {0.2, 1, 10, 25, 40, 100}

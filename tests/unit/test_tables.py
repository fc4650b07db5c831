"""The comparison table: what it shows for succeeded and failed trials, in text, CSV and markdown; the per-rank plot."""

from __future__ import annotations

import csv
import io
import re

import pytest

from ringleader.report import figures, tables
from ringleader.models.summary import read
from ringleader.api import experiment, trial

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def trials() -> list[trial.Trial]:
    return trial.expand(experiment.parse({
        "apiVersion": "ringleader.dev/v1alpha1", "kind": "DistributedTrainingExperiment",
        "metadata": {"name": "cmp"},
        "spec": {"sync": {"staleness": 2}, "workers": {"replicas": 4},
                 "sweep": {"matrix": {"architecture": ["ParameterServer", "RingAllReduce"],
                                      "paradigm": ["BSP", "SSP"]}}},
    })).trials


SUMMARY = {"throughput": 1234.56, "iterationTimeP50Seconds": 0.0312, "iterationTimeP95Seconds": 0.0457,
           "computeFraction": 0.612, "commFraction": 0.288, "waitFraction": 0.1, "stragglerRank": 3,
           "commSeconds": 0.009, "lossLast": 0.25}


@pytest.fixture
def rows(trials) -> list[tables.ComparisonRow]:
    return [tables.row_for(trials[0], read(SUMMARY), "FINISHED"),
            tables.row_for(trials[1], None, "FAILED", "rank 2 (worker-1) exited with code 3: RuntimeError: boom | x")]


def test_a_row_takes_its_identity_from_the_trial_and_its_numbers_from_the_summary(trials, rows):
    assert [t.parameters for t in trials] == [{"architecture": "ParameterServer", "paradigm": "BSP"},
                                              {"architecture": "ParameterServer", "paradigm": "SSP"},
                                              {"architecture": "RingAllReduce", "paradigm": "BSP"}]
    row = rows[0]
    assert (row.trial, row.architecture, row.paradigm, row.workers) == ("cmp-0", "ParameterServer", "BSP", 4)
    assert row.throughput == 1234.56 and row.p95_seconds == 0.0457 and row.wait_fraction == 0.1
    assert rows[1].throughput is None and rows[1].status == "FAILED"


def test_the_text_table_shows_milliseconds_shares_and_the_failure_reason(rows):
    table = tables.format_table(rows)
    lines = table.splitlines()
    assert lines[0].split()[:4] == ["trial", "architecture", "paradigm", "workers"]
    assert set(lines[1]) == {"-", " "}
    succeeded = lines[2].split()
    assert succeeded == ["cmp-0", "ParameterServer", "BSP", "4", "1234.6", "31.2", "45.7", "61%", "29%", "10%",
                         "FINISHED"]
    assert lines[3].split() == ["cmp-1", "ParameterServer", "SSP", "4", "-", "-", "-", "-", "-", "-", "FAILED"]
    assert lines[4] == "cmp-1: rank 2 (worker-1) exited with code 3: RuntimeError: boom | x"
    # Columns line up: every status starts at the same character.
    assert lines[2].index("FINISHED") == lines[3].index("FAILED")


def test_csv_keeps_unrounded_si_numbers_and_empty_cells_for_missing_ones(rows):
    parsed = list(csv.DictReader(io.StringIO(tables.to_csv(rows))))
    assert float(parsed[0]["iteration_time_p50_seconds"]) == 0.0312
    assert float(parsed[0]["throughput"]) == 1234.56
    assert float(parsed[0]["comm_seconds"]) == 0.009 and float(parsed[0]["loss_last"]) == 0.25
    assert parsed[0]["parameters"] == "architecture=ParameterServer;paradigm=BSP"
    assert parsed[1]["throughput"] == "" and parsed[1]["status"] == "FAILED"
    assert "boom | x" in parsed[1]["message"]


def test_markdown_escapes_pipes_and_right_aligns_numbers(rows):
    lines = tables.to_markdown(rows).splitlines()
    assert lines[0].startswith("| trial | architecture |")
    assert lines[1].split("|")[4] == "---:"  # workers
    assert len(lines) == 4
    assert all(line.count("|") - line.count("\\|") == len(tables.COLUMNS) + 1 for line in lines)


def worker_records(rank: int, slow: float = 1.0) -> list[dict]:
    records = []
    for step in range(12):
        record = {"step": step, "role": "worker", "warmup": step < 2, "time/data": 0.001, "time/forward": 0.01 * slow,
                  "time/backward": 0.02 * slow, "time/comm": 0.005, "time/wait": 0.002, "time/update": 0.001,
                  "time/iteration": 0.04 * slow + 0.01}
        if step < 2:
            record["time/forward"] = 5.0  # warm-up outliers are left out
        records.append(record)
    return records


def test_a_rank_breakdown_averages_the_steady_iterations_only():
    breakdown = figures.rank_breakdown(1, worker_records(1, slow=2.0))
    assert breakdown.iterations == 10
    assert breakdown.phases["time/forward"] == pytest.approx(0.02)
    assert breakdown.phases["time/iteration"] == pytest.approx(0.09)
    assert breakdown.unaccounted == pytest.approx(0.09 - (0.001 + 0.02 + 0.04 + 0.005 + 0.002 + 0.001))
    server = [{"step": 0, "role": "ps", "server/aggregation": 0.01, "server/queue_depth": 2}]
    assert figures.rank_breakdown(0, server) is None


def test_the_rank_breakdown_plot_is_a_png(tmp_path):
    breakdowns = [figures.rank_breakdown(rank, worker_records(rank, slow=1.0 + rank)) for rank in range(3)]
    data = figures.plot_rank_breakdown(breakdowns, tmp_path / "breakdown.png").read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 10_000


def test_names_in_the_markdown_description_stay_text():
    # MLflow renders a sweep run's description as markdown: a name from a file or a tag must stay text.
    hostile = "<img src=x onerror=alert(1)> [link](http://x) *em* a|b"
    shown = tables.markdown_text(hostile)
    assert "<" not in shown and ">" not in shown
    assert shown == ("&lt;img src=x onerror=alert\\(1\\)&gt; \\[link\\]\\(http://x\\) \\*em\\* a\\|b")
    table = tables.Table(["trial", "throughput"], [[hostile, "1.0"]], {1})
    assert table.markdown().splitlines()[2] == f"| {shown} | 1.0 |"


def test_with_a_target_the_table_and_csv_lead_with_time_and_iterations_to_it():
    timed = trial.expand(experiment.parse({
        "apiVersion": "ringleader.dev/v1alpha1", "kind": "DistributedTrainingExperiment", "metadata": {"name": "acc"},
        "spec": {"model": {"target": {"accuracyPercent": 90}, "evaluation": {"everyIterations": 5}},
                 "data": {"format": "Digits"}, "sweep": {"matrix": {"paradigm": ["BSP", "ASP"]}}},
    })).trials
    rows = [tables.row_for(timed[0], read({**SUMMARY, "targetSeconds": 12.34, "targetIterations": 40}), "FINISHED"),
            tables.row_for(timed[1], read(SUMMARY), "FINISHED")]  # finished without reaching it

    header, _, first, second = tables.format_table(rows).splitlines()
    assert re.split(r"\s{2,}", header)[:6] == ["trial", "architecture", "paradigm", "workers",
                                      "time to 90 % held-out accuracy (s)", "iterations to it"]
    assert first.split()[4:6] == ["12.3", "40"] and second.split()[4:6] == ["never", "never"]
    parsed = list(csv.DictReader(io.StringIO(tables.to_csv(rows))))
    assert list(parsed[0])[4:7] == ["target", "target_seconds", "target_iterations"]
    assert (parsed[0]["target"], parsed[0]["target_seconds"], parsed[1]["target_seconds"]) == \
        ("90 % held-out accuracy", "12.34", "")


def test_without_a_target_the_table_keeps_its_columns(rows):
    assert re.split(r"\s{2,}", tables.format_table(rows).splitlines()[0])[4] == "throughput (samples/s)"


def test_placement_gets_a_column_only_where_a_trial_asked_for_one_or_ran_on_several_nodes(trials, rows):
    one_node = {**SUMMARY, "nodeCount": 1, "crossNodeByteShare": 0.0}
    assert "placement" not in tables.format_table([tables.row_for(trials[0], read(one_node), "FINISHED")])
    placed = trial.expand(experiment.parse({
        "apiVersion": "ringleader.dev/v1alpha1", "kind": "DistributedTrainingExperiment", "metadata": {"name": "cmp"},
        "spec": {"scheduling": {"placement": {"ranks": "Spread"}}, "sweep": {"repetitions": 2}}})).trials
    spread = tables.row_for(placed[0], read({**SUMMARY, "nodeCount": 5, "crossNodeByteShare": 1.0}), "FINISHED")
    lines = tables.format_table([spread, tables.row_for(placed[1], None, "FAILED")]).splitlines()
    assert re.split(r"\s{2,}", lines[0])[-2:] == ["placement", "status"]
    assert lines[2].endswith("Spread: 5 nodes, 100% across  FINISHED")
    assert re.split(r"\s{2,}", lines[3])[-2:] == ["Spread", "FAILED"]  # asked for, nothing recorded
    [parsed] = list(csv.DictReader(io.StringIO(tables.to_csv([spread]))))
    assert (parsed["placement"], parsed["node_count"], parsed["cross_node_byte_share"]) == ("Spread", "5.0", "1.0")


def test_the_rank_breakdown_legend_has_one_entry_per_band_and_none_for_an_empty_one(tmp_path, monkeypatch):
    closed = []
    monkeypatch.setattr(figures.pyplot, "close", closed.append)  # keep the figure to read its legend
    breakdowns = [figures.rank_breakdown(rank, worker_records(rank, slow=1.0 + rank)) for rank in range(2)]
    assert all(b.unaccounted > 0 for b in breakdowns)  # time in no phase: drawn in the "other" band

    figures.plot_rank_breakdown(breakdowns, tmp_path / "breakdown.png")

    labels = [text.get_text() for text in closed[0].axes[0].get_legend().get_texts()]
    assert labels.count("other") == 1
    assert len(labels) == len(set(labels))
    assert "evaluation" not in labels  # no rank evaluated: no empty band

"""docs/plan.md's table of plans checked on the test cluster is what the code plans from the inputs the study kept
(docs/studies/plan-nodes/<run>/: the one-worker trial, the probe's summary, the measured iterations), and the band
every plan states for that cluster (at_scale.CHECKED) is what those pairs fit."""

from __future__ import annotations

import json
import pathlib
import re
import statistics

import pytest

from ringleader.models import validation
from ringleader.planning import at_scale, network, profiles

ROOT = pathlib.Path(__file__).resolve().parents[2]
KEPT = ROOT / "docs" / "studies" / "plan-nodes"
ROW = re.compile(r"^\| ([\w-]+) \| (\w+) \| (\d) \| \d \| ([\d.]+) \| ([\d.]+) \| ([+-][\d.]+) % \|", re.M)


def documented() -> dict[tuple[str, str, int], tuple[float, float, float]]:
    section = (ROOT / "docs" / "plan.md").read_text().split("### Checked on the test cluster")[1]
    return {(run, label, int(n)): (float(measured), float(planned), float(error))
            for run, label, n, measured, planned, error in ROW.findall(section)}


def planned_errors() -> dict[tuple[str, str, int], tuple[float, float]]:
    """{(run, architecture, workers): (measured seconds, planned seconds)} of every kept run, planned again."""
    found = {}
    for inputs in sorted(path.parent for path in KEPT.glob("*/measured.json")):
        plans = at_scale.plan(profiles.read(inputs / "alone"), network.read(inputs / "network.json"),
                              at_scale.Cluster((2, 3), servers=(1,)))
        for key, trial in json.loads((inputs / "measured.json").read_text())["trials"].items():
            label, workers = key.split()
            [plan] = [p for p in plans if p.label == label and p.workers == int(workers)]
            found[(inputs.name, label, int(workers))] = (trial["iterationP50Seconds"], plan.iteration_seconds)
    return found


def test_the_documented_plans_of_the_test_cluster_are_what_the_kept_inputs_plan():
    table, planned = documented(), planned_errors()
    assert set(table) == set(planned) and len(table) >= 6
    for key, (shown_measured, shown_planned, shown_error) in table.items():
        measured, plan = planned[key]
        assert shown_measured == pytest.approx(1000 * measured, abs=0.05)
        assert shown_planned == pytest.approx(1000 * plan, abs=0.05), key
        assert shown_error == pytest.approx(100 * (plan / measured - 1), abs=0.05)


def test_the_band_every_plan_states_for_the_test_cluster_is_what_its_pairs_fit():
    errors = [abs(plan / measured - 1) for measured, plan in planned_errors().values()]
    checked = at_scale.CHECKED
    assert (checked.within, checked.median, checked.worst, checked.pairs) == (
        validation.fit(errors), round(statistics.median(errors), 3), validation.round_up(max(errors)), len(errors))
    assert checked.workers == (2, 3)
    note = at_scale.band_note()
    assert note.startswith("no validated band for this cluster") and f"{checked.pairs} pairs" in note

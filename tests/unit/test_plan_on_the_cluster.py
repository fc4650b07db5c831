"""docs/plan.md's table of plans checked on the test cluster is what the code plans from the inputs that study kept
(docs/studies/plan-nodes/: the one-worker trial, the probe's summary, the measured iterations)."""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from ringleader.planning import at_scale, network, profiles

ROOT = pathlib.Path(__file__).resolve().parents[2]
INPUTS = ROOT / "docs" / "studies" / "plan-nodes"
ROW = re.compile(r"^\| (\w+) \| (\d) \| \d \| ([\d.]+) \| ([\d.]+) \| ([+-][\d.]+) % \|", re.M)


def documented() -> dict[tuple[str, int], tuple[float, float, float]]:
    section = (ROOT / "docs" / "plan.md").read_text().split("### Checked on the test cluster")[1]
    return {(label, int(n)): (float(measured), float(planned), float(error))
            for label, n, measured, planned, error in ROW.findall(section)}


def test_the_documented_plans_of_the_test_cluster_are_what_the_kept_inputs_plan():
    plans = at_scale.plan(profiles.read(INPUTS / "alone"), network.read(INPUTS / "network.json"),
                          at_scale.Cluster((2, 3), servers=(1,)))
    measured = json.loads((INPUTS / "measured.json").read_text())["trials"]
    table = documented()
    assert set(table) == {(key.split()[0], int(key.split()[1])) for key in measured} and len(table) == 6
    for (label, workers), (shown_measured, shown_planned, shown_error) in table.items():
        [planned] = [p for p in plans if p.label == label and p.workers == workers]
        seconds = measured[f"{label} {workers}"]["iterationP50Seconds"]
        assert shown_measured == pytest.approx(1000 * seconds, abs=0.05)
        assert shown_planned == pytest.approx(1000 * planned.iteration_seconds, abs=0.05), (label, workers)
        assert shown_error == pytest.approx(100 * (planned.iteration_seconds / seconds - 1), abs=0.05)

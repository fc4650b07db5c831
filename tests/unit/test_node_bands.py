"""The bands `ringleader predict` states across nodes hold on the recorded runs of Study 1 across nodes (docs/studies/,
`make study-nodes`): each trial's own prediction of every architecture, against what that architecture's trial of
the same run measured. Recorded timings are the input; nothing here is timed."""

from __future__ import annotations

import pathlib

import pytest

from ringleader.models import calibration, node_validation, validation

STUDIES = pathlib.Path(__file__).resolve().parents[2] / "docs" / "studies"


@pytest.fixture(scope="module")
def runs() -> dict[str, dict]:
    return node_validation.read(STUDIES)


@pytest.fixture(scope="module")
def pairs(runs) -> list[node_validation.NodePair]:
    return node_validation.pairs(runs)


def test_the_published_bands_across_nodes_are_what_the_recorded_runs_fit(pairs):
    assert node_validation.bands(pairs) == validation.NODE_BANDS
    assert validation.NODE_BANDS  # at least one quota validated


def test_a_band_across_nodes_held_nine_in_ten_pairs_of_runs_it_was_not_fitted_on(pairs):
    for cpus, band in validation.NODE_BANDS.items():
        chosen = [p for p in pairs if p.pod_cpus == cpus]
        covered, total = node_validation.held_out_by_run(chosen)
        assert band.held_out == (covered, total) and covered >= validation.COVERAGE * total
        assert band.runs >= 2 and band.pairs == total


def test_one_run_states_no_band_however_well_it_fits(pairs):
    for cpus in validation.NODE_BANDS:
        first = next(p.run for p in pairs if p.pod_cpus == cpus)
        one_run = [p for p in pairs if p.pod_cpus == cpus and p.run == first]
        assert validation.fit([p.error for p in one_run]) is not None  # enough pairs for a band, yet
        assert node_validation.band(one_run) is None  # nothing held out by run


def test_only_placements_where_every_byte_crossed_a_nic_are_fitted(runs, pairs):
    packed = [t for run in runs.values() for t in run["trials"] if t["crossNodeByteShare"] < 1.0]
    assert packed, "the study runs packed trials too: they are what is left out"
    assert not {(p.run, p.source) for p in pairs} & {(r, t["trial"]) for r, run in runs.items()
                                                      for t in run["trials"] if t["crossNodeByteShare"] < 1.0}


def test_each_recorded_run_ran_on_three_nodes_with_capped_nics_at_one_quota(runs):
    for name, run in runs.items():
        assert len(run["nodes"]) == 3, name
        quotas = {node_validation.pod_cpus(t) for t in run["trials"]}
        assert len(quotas) == 1 and None not in quotas, name
        assert {t["linkKind"] for t in run["trials"] if t.get("prediction")} == {calibration.NETWORK}, name


def test_a_band_across_nodes_says_where_it_does_not_apply():
    cpus, found = next(iter(validation.NODE_BANDS.items()))
    spread = validation.Placed(True, 1.0, 1.0, cpus)
    assert validation.band(calibration.NETWORK, "ring", 3, "BSP", placed=spread) == (found, "")
    assert validation.band(calibration.NETWORK, "ring", 8, "BSP", placed=spread)[1] == \
        f"validated at {', '.join(map(str, found.workers))} workers, not 8"
    band, note = validation.band(calibration.NETWORK, "hring", 3, "BSP", placed=spread)
    assert band is None and note.startswith("not validated across nodes: the study ran 1ps, p2p, ring")
    band, note = validation.band(calibration.NETWORK, "ring", 3, "BSP", placed=validation.Placed(True, 0.5, 1.0, cpus))
    assert band is None and note.startswith("no band: 50% of the trial's bytes stay inside a node")
    band, note = validation.band(calibration.NETWORK, "1ps", 3, "BSP", placed=validation.Placed(True, 1.0, 0.75, cpus))
    assert band is None and note.startswith("no band: 25% of this architecture's bytes stay inside a node")
    band, note = validation.band(calibration.NETWORK, "ring", 3, "BSP", placed=validation.Placed(True, 1.0, 1.0, 1.0))
    assert band is None and note.startswith("not validated across nodes at pods of 1 CPU (validated at: ")
    band, note = validation.band(calibration.NETWORK, "ring", 3, "BSP")
    assert band is None and "not every rank recorded its node" in note
    assert validation.band(calibration.NETWORK, "ring", 3, "ASP", placed=spread)[0] is None

"""The validated bands `ringleader predict` shows are the ones docs/predict-validation.md publishes, and say why not."""

from __future__ import annotations

import pathlib
import re

import pytest

from ringleader.models import calibration, validation
from ringleader.models.prediction_serving import Cores

PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "predict-validation.md"


def published() -> dict[tuple[str, str, str], tuple]:
    """The page's table of bands: (kind, architecture, machine) -> (load per CPU, pairs, within %, median %, worst %,
    workers, threads per CPU, machines, held out by machine)."""
    rows = re.findall(r"^\| `(\w+)` \| `(\w+)` \| ([\w ]+) \| ([\d.]+) \| (\d+) \| ([\d.]+) % \| ([\d.]+) % \| "
                      r"([\d.]+) % \| ([\d, ]+) \| ([\d.]+) \| (\d+) \| (\d+) of (\d+) \|$", PAGE.read_text(), re.M)
    return {(kind, label, machine): (float(load), int(pairs), float(within), float(median), float(worst),
                                     tuple(int(n) for n in workers.split(",")), float(threads), int(machines),
                                     (int(covered), int(total)))
            for kind, label, machine, load, pairs, within, median, worst, workers, threads, machines, covered, total
            in rows}


def test_the_page_publishes_exactly_the_bands_the_code_shows():
    expected = {(*key, band.machine()): (band.load_per_cpu, band.pairs, round(100 * band.within, 1),
                                         round(100 * band.median, 1), round(100 * band.worst, 1), band.workers,
                                         band.threads_per_cpu, band.machines, band.held_out)
                for key, bands in validation.BANDS.items() for band in bands}
    assert published() == expected


def published_across_nodes() -> dict[float, tuple[int, int, float, float, float, tuple[int, ...], tuple[str, ...],
                                                  tuple[int, int]]]:
    """The page's table of bands across nodes: pod CPUs -> (runs, pairs, within %, median %, worst %, workers,
    architectures, held out by run)."""
    rows = re.findall(r"^\| ([\d.]+) CPU \| (\d+) \| (\d+) \| ([\d.]+) % \| ([\d.]+) % \| ([\d.]+) % \| ([\d, ]+) \| "
                      r"([`\w, ]+) \| (\d+) of (\d+) \|$", PAGE.read_text(), re.M)
    return {float(cpus): (int(runs), int(pairs), float(within), float(median), float(worst),
                          tuple(int(n) for n in workers.split(",")), tuple(a.strip(" `") for a in labels.split(",")),
                          (int(covered), int(total)))
            for cpus, runs, pairs, within, median, worst, workers, labels, covered, total in rows}


def test_the_page_publishes_exactly_the_bands_across_nodes_the_code_shows():
    expected = {cpus: (band.runs, band.pairs, round(100 * band.within, 1), round(100 * band.median, 1),
                       round(100 * band.worst, 1), band.workers, band.architectures, band.held_out)
                for cpus, band in validation.NODE_BANDS.items()}
    assert expected and published_across_nodes() == expected


def test_a_band_is_the_order_statistic_that_holds_nine_in_ten_further_errors():
    # k = ceil(0.9 (n + 1)): of 19 errors the 18th smallest; of 9 the 9th (the worst); of 8 there is no 90 % band.
    errors = [i / 1000 for i in range(1, 20)]
    assert validation.fit(errors) == 0.018
    assert validation.fit([-e for e in errors]) == 0.018  # a band bounds |error|, low or high
    assert validation.fit(errors[:9]) == 0.009
    assert validation.fit(errors[:8]) is None
    assert validation.fit([0.01701]) is None and validation.fit([0.01701] * 9) == 0.018  # rounded up to 0.1 %


def test_every_link_the_models_cannot_predict_on_is_explained_on_the_page():
    text = PAGE.read_text()
    for kind in validation.UNPREDICTABLE:
        assert f"`{kind}`" in text
    assert calibration.LOOPBACK in validation.UNPREDICTABLE


def test_a_band_says_where_it_does_not_apply():
    band, note = validation.band(calibration.EMULATED, "1ps", 3, "BSP")
    assert band is validation.BANDS[calibration.EMULATED, "1ps"][-1] and note == ""
    assert validation.band(calibration.EMULATED, "1ps", 8, "BSP")[1] == "validated at 2, 3 workers, not 8"
    assert validation.band(calibration.EMULATED, "p2p", 2, "SSP") == (None, "not validated under SSP (the bench "
                                                                            "runs BSP)")
    assert validation.band(calibration.NETWORK, "1ps", 2, "BSP")[0] is None
    assert validation.band(calibration.LOOPBACK, "1ps", 2, "BSP") == (None, "")  # the prediction says why instead


def test_other_work_on_the_machine_takes_the_band_fitted_beside_as_much_other_work_or_none():
    alone, busy = validation.BANDS[calibration.EMULATED, "p2p"]
    assert alone.busy_cores == 0 < busy.busy_cores and alone.load_per_cpu < busy.load_per_cpu
    assert alone.within < busy.within  # other work takes cores the models do not see
    assert validation.band(calibration.EMULATED, "p2p", 3, "BSP", Cores(1.0, 1.0, 0.3))[0] is alone
    assert validation.band(calibration.EMULATED, "p2p", 3, "BSP", Cores(1.0, 1.0, alone.load_per_cpu))[0] is alone
    assert validation.band(calibration.EMULATED, "p2p", 3, "BSP", Cores(1.0, 1.0, alone.load_per_cpu + 0.01))[0] is busy
    assert validation.band(calibration.EMULATED, "p2p", 3, "BSP", Cores(1.0, 1.0, None))[0] is busy  # not recorded
    band, note = validation.band(calibration.EMULATED, "p2p", 3, "BSP", Cores(1.0, 1.0, 3.5))
    assert band is None
    said = re.fullmatch(r"no band: the machine's load was ([\d.]+) per CPU when the ranks ended, the bench's at most "
                        r"([\d.]+); other work took cores that no validated trial lost", note)
    assert said and float(said[1]) == 3.5 and float(said[2]) == pytest.approx(busy.load_per_cpu, abs=0.01)


def test_a_band_does_not_apply_where_the_ranks_waited_for_cores_longer_than_the_benchs_did():
    measured_at = validation.BANDS[calibration.EMULATED, "p2p"][-1].threads_per_cpu
    inside = Cores(workers_per_cpu=1.0, threads_per_cpu=measured_at)
    assert validation.band(calibration.EMULATED, "p2p", 3, "BSP", inside)[0] is not None
    band, note = validation.band(calibration.EMULATED, "p2p", 3, "BSP", Cores(4.0, 4.0))
    assert band is None
    assert note == (f"no band: the trial's ranks ran 4 threads per CPU, the bench at most {measured_at:.3g}; they "
                    "waited for cores longer than any validated trial did")

"""The validated bands `ringleader predict` shows are the ones docs/predict-validation.md publishes, and say why not."""

from __future__ import annotations

import pathlib
import re

from ringleader.analysis import calibration, validation

PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "predict-validation.md"


def published() -> dict[tuple[str, str], tuple[int, float, float, tuple[int, ...]]]:
    """The page's table of bands: (kind, architecture) -> (pairs, median %, worst %, workers)."""
    rows = re.findall(r"^\| `(\w+)` \| `(\w+)` \| (\d+) \| ([\d.]+) % \| ([\d.]+) % \| ([\d, ]+) \|$",
                      PAGE.read_text(), re.M)
    return {(kind, label): (int(pairs), float(median), float(worst), tuple(int(n) for n in workers.split(",")))
            for kind, label, pairs, median, worst, workers in rows}


def test_the_page_publishes_exactly_the_bands_the_code_shows():
    expected = {key: (band.pairs, round(100 * band.median, 1), round(100 * band.worst, 1), band.workers)
                for key, band in validation.BANDS.items()}
    assert published() == expected


def test_every_link_the_models_cannot_predict_on_is_explained_on_the_page():
    text = PAGE.read_text()
    for kind in validation.UNPREDICTABLE:
        assert f"`{kind}`" in text
    assert calibration.LOOPBACK in validation.UNPREDICTABLE


def test_a_band_says_where_it_does_not_apply():
    band, note = validation.band(calibration.EMULATED, "1ps", 3, "BSP")
    assert band is validation.BANDS[calibration.EMULATED, "1ps"] and note == ""
    assert validation.band(calibration.EMULATED, "1ps", 8, "BSP")[1] == "validated at 2, 3, 4 workers, not 8"
    assert validation.band(calibration.EMULATED, "p2p", 2, "SSP") == (None, "not validated under SSP (the bench "
                                                                            "runs BSP)")
    assert validation.band(calibration.NETWORK, "1ps", 2, "BSP")[0] is None
    assert validation.band(calibration.LOOPBACK, "1ps", 2, "BSP") == (None, "")  # the prediction says why instead

"""How far `ringleader predict` may be trusted: the validated error band of each kind of prediction.

Called by analysis/prediction.py, which gives every estimate its band (or says why it has none), and so by
`ringleader predict` and the report's prediction figure. The numbers are bench/bench_predict_validation.py's
published run, per scenario kind (the link's kind and the predicted architecture): every trial of a sweep
predicting every other trial of its worker count, BSP, one parameter server. docs/predict-validation.md
prints the same table (tests/unit/test_analysis_validation.py checks they agree). Re-run the bench and
update both when the models or the runtime change.
"""

from __future__ import annotations

import dataclasses

from ringleader.analysis import calibration
from ringleader.api.spec import Paradigm


@dataclasses.dataclass(frozen=True)
class Band:
    """The |predicted / measured - 1| of one scenario kind over the bench's pairs."""

    median: float
    worst: float
    pairs: int
    workers: tuple[int, ...]
    """workers are the worker counts the bench ran."""

    def said(self) -> str:
        return f"±{100 * self.worst:.1f}% (median {100 * self.median:.1f}%)"


BANDS: dict[tuple[str, str], Band] = {
    (calibration.EMULATED, "1ps"): Band(median=0.020, worst=0.035, pairs=30, workers=(2, 3, 4)),
    (calibration.EMULATED, "p2p"): Band(median=0.043, worst=0.071, pairs=30, workers=(2, 3, 4)),
    (calibration.EMULATED, "ring"): Band(median=0.018, worst=0.045, pairs=30, workers=(2, 3, 4)),
}
"""BANDS: (link kind, architecture label) -> its band: of the five published runs of bench/bench_predict_validation.py,
the largest median and the largest worst |error| (rounded up) of the pairs predicting that architecture (pairs: all
runs'). Run 5 is the first with medians; it fell inside runs 1 to 4's bands, and one run of 6 pairs is too few to
narrow a band on its own."""

UNPREDICTABLE: dict[str, str] = {
    calibration.LOOPBACK: "cannot predict on an uncapped loopback: every rank shares this machine's cores, so a "
                          "message costs CPU time and a wait for a core rather than link time, and neither the probe "
                          "nor the iterations repeat from one trial to the next (docs/predict-validation.md); cap "
                          "the link (spec.network.bandwidth) to predict on one machine",
}
"""UNPREDICTABLE: link kind -> why the models cannot predict there (the bench measured worse than its bound)."""


def band(kind: str, label: str, workers: int, paradigm: Paradigm | str) -> tuple[Band | None, str]:
    """(the band of this prediction, a note): None with the reason when it was not validated (none on a link of an
    UNPREDICTABLE kind, whose reason the whole prediction carries)."""
    if kind in UNPREDICTABLE:
        return None, ""
    if Paradigm(paradigm) != Paradigm.BSP:
        return None, f"not validated under {Paradigm(paradigm).value} (the bench runs BSP)"
    found = BANDS.get((kind, label))
    if found is None:
        return None, f"not validated: the bench has no {label} prediction on a link of kind {kind}"
    if workers not in found.workers:
        return found, f"validated at {', '.join(map(str, found.workers))} workers, not {workers}"
    return found, ""

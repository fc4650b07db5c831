"""How far `ringleader predict` may be trusted: the validated error band of each kind of prediction.

Called by models/prediction.py, which gives every estimate its band (or says why it has none), and so by
`ringleader predict` and the report's prediction figure. A band is a coverage statement: the |error| within
which 9 in 10 held-out predictions of its scenario kind fell. On one machine (an emulated link) the kind is the
link's and the predicted architecture's, fitted on bench/bench_predict_validation.py's recorded runs (every trial
of a sweep predicting every trial of its worker count, BSP, one parameter server); tests/unit/
test_prediction_held_out.py predicts those runs again and checks BANDS are what they fit. Across the nodes of a
cluster (a network link) the kind is the pods' CPU quota, at placements where every byte crosses a NIC, fitted on
the recorded runs of Study 1 across nodes (`make study-nodes`; models/node_validation.py, tests/unit/
test_node_bands.py). docs/predict-validation.md prints both tables (tests/unit/test_models_validation.py checks
they agree).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

from ringleader.api.variants import Paradigm
from ringleader.models import calibration
from ringleader.models.prediction_serving import Cores

COVERAGE = 0.9
"""COVERAGE is the share of held-out predictions a band promises to hold: 9 in 10."""


@dataclasses.dataclass(frozen=True)
class Scored:
    """Trial `source` predicting trial `target`'s architecture, against what `target` measured: the pair a band is
    fitted on and held out with."""

    source: str
    target: str
    architecture: str
    workers: int
    predicted_seconds: float
    measured_seconds: float

    @property
    def error(self) -> float:
        return self.predicted_seconds / self.measured_seconds - 1.0

    @property
    def own(self) -> bool:
        return self.source == self.target


@dataclasses.dataclass(frozen=True)
class Coverage:
    """The |predicted / measured - 1| within which COVERAGE of the held-out predictions of one scenario kind fell
    (fit), with the median and worst of the pairs it was fitted on."""

    within: float
    median: float
    worst: float
    pairs: int
    workers: tuple[int, ...]
    """workers are the worker counts the runs had."""

    def said(self) -> str:
        return f"±{100 * self.within:.1f}% in 9 of 10 ({'; '.join(self._said_also())})"

    def _said_also(self) -> list[str]:
        """What said() states in its parentheses."""
        return [f"median {100 * self.median:.1f}%"]


@dataclasses.dataclass(frozen=True)
class Band(Coverage):
    """A band on one machine, an emulated link: one architecture's, on a machine as busy as the bench's."""

    threads_per_cpu: float
    """threads_per_cpu: the most crowded trial the bench ran (prediction_serving.Cores): past it the band does not
    apply, the trial's ranks having waited for cores more than the bench's did."""
    busy_cores: int
    """busy_cores: the other work the bench ran beside its trials, in cores kept busy (0: none; its --burners)."""
    load_per_cpu: float
    """load_per_cpu: the busiest machine it was fitted on (1-minute load per CPU): a trial on a busier machine takes
    the next band, fitted with more other work, or none."""
    machines: int = 1
    """machines: how many machines the bench's runs it was fitted on ran on (a machine here is new each boot)."""
    held_out: tuple[int, int] | None = None
    """held_out: (pairs covered, pairs) when each machine's pairs are scored against the band fitted on the other
    machines' alone: how it held on a machine it was not fitted on; None while one machine is all it has."""

    def _said_also(self) -> list[str]:
        held_out = [] if self.held_out is None else [f"{self.held_out[0]} of {self.held_out[1]} held out by machine"]
        return super()._said_also() + held_out

    def machine(self) -> str:
        """What its runs had beside them, for tables: "alone" or "2 busy cores"."""
        return f"{self.busy_cores} busy core{'s' * (self.busy_cores != 1)}" if self.busy_cores else "alone"


def fit(errors: Sequence[float], coverage: float = COVERAGE) -> float | None:
    """The band of these errors: the k-th smallest |error|, k = ceil(coverage (n + 1)), which a further prediction
    like them falls within with probability at least `coverage` (the order statistic of n exchangeable errors);
    None when there are too few for it (k > n: fewer than 9 at 90 %). Rounded up to 0.1 %, as bands are published."""
    ordered = sorted(abs(e) for e in errors)
    k = math.ceil(coverage * (len(ordered) + 1) - 1e-9)
    return round_up(ordered[k - 1]) if 0 < k <= len(ordered) else None


def round_up(fraction: float) -> float:
    """`fraction` rounded up to 0.1 %, the resolution bands are published at."""
    return math.ceil(round(fraction * 1000, 6)) / 1000


BANDS: dict[tuple[str, str], tuple[Band, ...]] = {
    (calibration.EMULATED, "1ps"): (
        Band(within=0.006, median=0.002, worst=0.006, pairs=48, workers=(2, 3), threads_per_cpu=2.0, busy_cores=0,
             load_per_cpu=1.002, machines=3, held_out=(47, 48)),
        Band(within=0.007, median=0.003, worst=0.007, pairs=42, workers=(2, 3), threads_per_cpu=2.0, busy_cores=2,
             load_per_cpu=2.006, machines=3, held_out=(41, 42))),
    (calibration.EMULATED, "p2p"): (
        Band(within=0.024, median=0.014, worst=0.024, pairs=48, workers=(2, 3), threads_per_cpu=2.0, busy_cores=0,
             load_per_cpu=1.002, machines=3, held_out=(48, 48)),
        Band(within=0.043, median=0.012, worst=0.043, pairs=42, workers=(2, 3), threads_per_cpu=2.0, busy_cores=2,
             load_per_cpu=2.006, machines=3, held_out=(39, 42))),
    (calibration.EMULATED, "ring"): (
        Band(within=0.019, median=0.007, worst=0.019, pairs=48, workers=(2, 3), threads_per_cpu=2.0, busy_cores=0,
             load_per_cpu=1.002, machines=3, held_out=(45, 48)),
        Band(within=0.038, median=0.008, worst=0.038, pairs=42, workers=(2, 3), threads_per_cpu=2.0, busy_cores=2,
             load_per_cpu=2.006, machines=3, held_out=(41, 42))),
}
"""BANDS: (link kind, architecture label) -> its bands, one per machine load the recorded runs of
bench/bench_predict_validation.py had (alone, then with busy cores beside: tests/fixtures/predict_validation.json.gz,
docs/predict-validation.md), the quietest first; each fit over that architecture's pairs at that load on every
machine the bench ran on, every pair of the architectures together while the runs have fewer than 9 pairs of one
architecture, and held out by machine. Other work widens a band: it takes cores the models do not see."""


@dataclasses.dataclass(frozen=True)
class NodeBand(Coverage):
    """A band across the nodes of a cluster, at pods of one CPU quota where every byte crosses a NIC: every
    architecture's pairs together (a study has too few of one for a band of its own)."""

    pod_cpus: float
    """pod_cpus: the workers' CPU quota (a fractional limit is a CFS quota: it prices every byte the host moves)."""
    architectures: tuple[str, ...]
    """architectures: the labels of the architectures the study ran, whose predictions it holds for."""
    runs: int
    """runs: the study's recorded runs it was fitted on."""
    held_out: tuple[int, int]
    """held_out: (pairs covered, pairs) when each run's pairs are scored against the band of the other runs."""


NODE_BANDS: dict[float, NodeBand] = {
    0.25: NodeBand(within=0.1, median=0.067, worst=0.122, pairs=44, workers=(2, 3), pod_cpus=0.25,
                   architectures=("1ps", "p2p", "ring"), runs=3, held_out=(41, 44)),
}
"""NODE_BANDS: the workers' CPU quota -> the band of predictions across nodes at that quota (link kind
calibration.NETWORK), fitted on the recorded runs of Study 1 across nodes (node_validation.RUNS) where the runs
held out by run kept 9 in 10 inside; at other quotas, and at placements that keep bytes inside a node, none."""

SHARED_NODE = ("such placements were missed by up to 72 % and did not repeat from one run to the next "
               "(docs/predict-validation.md); for a band, keep every byte on a NIC (placement ranks Spread, or "
               "servers Apart)")
"""SHARED_NODE: why a prediction with bytes inside a node has no band across nodes."""

UNPREDICTABLE: dict[str, str] = {
    calibration.LOOPBACK: "cannot predict on an uncapped loopback: every rank shares this machine's cores, so a "
                          "message costs CPU time and a wait for a core rather than link time, and neither the probe "
                          "nor the iterations repeat from one trial to the next (docs/predict-validation.md); cap "
                          "the link (spec.network.bandwidth) to predict on one machine",
}
"""UNPREDICTABLE: link kind -> why the models cannot predict there (the bench measured worse than its bound)."""


@dataclasses.dataclass(frozen=True)
class Placed:
    """Where a prediction across nodes stands: what its band depends on besides its link."""

    known: bool = False
    """known: every rank recorded its node."""
    trial_share: float = 1.0
    """trial_share: the share of the trial's own bytes that crossed nodes."""
    predicted_share: float = 1.0
    """predicted_share: the share of the predicted architecture's bytes that would, placed as the trial's ranks."""
    worker_cpus: float | None = None
    """worker_cpus: the workers' CPU quota; None where not recorded."""


def band(kind: str, label: str, workers: int, paradigm: Paradigm | str, cores: Cores = Cores(),
         placed: Placed = Placed()) -> tuple[Coverage | None, str]:
    """(the band of this prediction, a note): None with the reason when it was not validated or does not apply (none
    on a link of an UNPREDICTABLE kind, whose reason the whole prediction carries)."""
    if kind in UNPREDICTABLE:
        return None, ""
    if Paradigm(paradigm) != Paradigm.BSP:
        return None, f"not validated under {Paradigm(paradigm).value} (the bench runs BSP)"
    if kind == calibration.NETWORK:
        return node_band(label, workers, placed)
    bands = BANDS.get((kind, label))
    if bands is None:
        return None, f"not validated: the bench has no {label} prediction on a link of kind {kind}"
    # Without the load, the busiest machine's band: the widest promise the bench can make without knowing it.
    load = bands[-1].load_per_cpu if cores.load_per_cpu is None else cores.load_per_cpu
    found = next((b for b in bands if load <= b.load_per_cpu), None)
    if found is None:
        return None, (f"no band: the machine's load was {load:.3g} per CPU when the ranks ended, the bench's at most "
                      f"{bands[-1].load_per_cpu:.3g}; other work took cores that no validated trial lost")
    if cores.threads_per_cpu > found.threads_per_cpu:
        return None, (f"no band: the trial's ranks ran {cores.threads_per_cpu:.3g} threads per CPU, the bench at most "
                      f"{found.threads_per_cpu:.3g}; they waited for cores longer than any validated trial did")
    if workers not in found.workers:
        return found, f"validated at {', '.join(map(str, found.workers))} workers, not {workers}"
    return found, ""


def node_band(label: str, workers: int, placed: Placed) -> tuple[NodeBand | None, str]:
    """The band of a prediction across nodes, or why it has none."""
    if not placed.known:
        return None, "no band: not every rank recorded its node, and bands across nodes hold per placement"
    for share, whose in ((placed.trial_share, "the trial's"), (placed.predicted_share, "this architecture's")):
        if share < 1.0:
            return None, f"no band: {100 * (1 - share):.0f}% of {whose} bytes stay inside a node; {SHARED_NODE}"
    found = NODE_BANDS.get(placed.worker_cpus) if placed.worker_cpus is not None else None
    if found is None:
        validated = ", ".join(f"{cpus:g}" for cpus in sorted(NODE_BANDS)) or "none yet"
        at = "an unrecorded quota" if placed.worker_cpus is None else f"{placed.worker_cpus:g} CPU"
        return None, (f"not validated across nodes at pods of {at} (validated at: {validated} CPU); "
                      "the quota prices every byte the host moves")
    if label not in found.architectures:
        return None, f"not validated across nodes: the study ran {', '.join(found.architectures)}, not {label}"
    if workers not in found.workers:
        return found, f"validated at {', '.join(map(str, found.workers))} workers, not {workers}"
    return found, ""
